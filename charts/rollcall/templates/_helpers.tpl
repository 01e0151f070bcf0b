{{/*
Names, labels and images shared by every template. Object names are fixed (rollcall-controller,
rollcall-injector), as Linkerd's are: the controller's Lease, the sidecars' default controller
address and the webhook's certificate all name them, and the CRD and the webhook are
cluster-wide, so one Rollcall runs per cluster.
*/}}

{{- define "rollcall.labels" -}}
app.kubernetes.io/part-of: rollcall
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels of one component: include with (list $ "controller"). */}}
{{- define "rollcall.selector" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: rollcall-{{ index . 1 }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
{{- end }}

{{/* Every label of one component's objects: include with (list $ "controller"). */}}
{{- define "rollcall.componentLabels" -}}
{{ include "rollcall.labels" (index . 0) }}
app.kubernetes.io/name: rollcall-{{ index . 1 }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/* An image reference: include with (list $ .Values.controller.image). */}}
{{- define "rollcall.image" -}}
{{- $root := index . 0 -}}
{{- $image := index . 1 -}}
{{- $registry := $image.registry | default $root.Values.image.registry -}}
{{- $tag := $image.tag | default $root.Values.image.tag | default $root.Chart.AppVersion -}}
{{- if $image.digest -}}
{{ printf "%s/%s@%s" $registry $image.repository $image.digest }}
{{- else -}}
{{ printf "%s/%s:%s" $registry $image.repository $tag }}
{{- end -}}
{{- end }}

{{/* How the roster channel is secured: "managed" (the default: the injector issues the
controller's certificate and hands its CA to sidecars), "secret" (the user's Secret and CA
ConfigMap) or "plaintext" (asked for by name). Fails on a combination that cannot work. */}}
{{- define "rollcall.rosterTLS" -}}
{{- $c := .Values.controller.tls -}}
{{- $ca := .Values.sidecar.controllerCA.configMap -}}
{{- if and $c.secretName $c.plaintext -}}
{{- fail "controller.tls.secretName and controller.tls.plaintext are both set: choose one" -}}
{{- else if $c.secretName -}}
{{- if empty $ca -}}
{{- fail "controller.tls.secretName is set but sidecar.controllerCA.configMap is empty: sidecars need the CA that signed the roster certificate" -}}
{{- end -}}
secret
{{- else if $ca -}}
{{- fail "sidecar.controllerCA.configMap is set but controller.tls.secretName is empty: set both to use your own certificate, or neither to let the injector issue one" -}}
{{- else if $c.plaintext -}}
plaintext
{{- else if not (and .Values.injector.enabled (eq .Values.injector.certificates.mode "self")) -}}
{{- fail "the roster channel is TLS by default with a certificate the injector issues, which needs injector.enabled=true and injector.certificates.mode=self; otherwise set controller.tls.secretName with sidecar.controllerCA.configMap, or controller.tls.plaintext=true (insecure)" -}}
{{- else -}}
managed
{{- end -}}
{{- end }}

{{/* The Secret the controller serves the roster port from, or nothing in plaintext. */}}
{{- define "rollcall.rosterSecret" -}}
{{- $mode := include "rollcall.rosterTLS" . -}}
{{- if eq $mode "managed" -}}
rollcall-controller-tls
{{- else if eq $mode "secret" -}}
{{ .Values.controller.tls.secretName }}
{{- end -}}
{{- end }}

{{/* The controller's in-cluster roster address, as sidecars dial it. */}}
{{- define "rollcall.controllerURL" -}}
{{- if .Values.sidecar.controllerURL -}}
{{ .Values.sidecar.controllerURL }}
{{- else -}}
{{ printf "%s://rollcall-controller.%s.svc:%d" (ternary "http" "https" (eq (include "rollcall.rosterTLS" .) "plaintext")) .Release.Namespace (int .Values.controller.grpcPort) }}
{{- end -}}
{{- end }}

{{/* The security context every Rollcall container runs with. */}}
{{- define "rollcall.containerSecurityContext" -}}
allowPrivilegeEscalation: false
privileged: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Soft or hard anti-affinity over nodes for one component: (list $ "controller" .Values.controller). */}}
{{- define "rollcall.affinity" -}}
{{- $root := index . 0 -}}
{{- $values := index . 2 -}}
{{- if $values.affinity -}}
{{ toYaml $values.affinity }}
{{- else if eq $values.podAntiAffinity "hard" -}}
podAntiAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- include "rollcall.selector" (list $root (index . 1)) | nindent 10 }}
{{- else if eq $values.podAntiAffinity "soft" -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "rollcall.selector" (list $root (index . 1)) | nindent 12 }}
{{- end -}}
{{- end }}
