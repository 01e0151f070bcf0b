//! Kubernetes' protobuf request bodies, for the kinds client-go's typed clients write: Helm
//! keeps its releases in Secrets and creates Namespaces this way, and `kubectl create
//! namespace|secret|configmap|serviceaccount` do too. A body is the `k8s\0` magic and a
//! `runtime.Unknown` envelope (type meta + the object's own message); it is turned into the
//! JSON object the rest of the server handles. Field numbers are those of `k8s.io/api` and
//! `apimachinery`'s `generated.proto`; prost decodes the wire format. Kinds not listed are
//! refused with a message naming what is accepted (answers are always JSON, which every
//! client that sends protobuf also accepts).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Buf;
use prost::encoding::{WireType, decode_key, decode_varint};
use serde_json::{Map, Value, json};

/// The prefix of every Kubernetes protobuf body.
pub const MAGIC: &[u8] = b"k8s\0";

/// How one field of a message becomes JSON.
#[derive(Clone, Copy)]
enum Kind {
    Str,
    Int,
    Bool,
    /// `bytes` holding JSON (FieldsV1).
    RawJson,
    Time,
    Msg(&'static [Field]),
    StrMap,
    BytesMap,
}

#[derive(Clone, Copy)]
struct Field {
    number: u32,
    name: &'static str,
    kind: Kind,
    repeated: bool,
}

const fn f(number: u32, name: &'static str, kind: Kind) -> Field {
    Field {
        number,
        name,
        kind,
        repeated: false,
    }
}

const fn r(number: u32, name: &'static str, kind: Kind) -> Field {
    Field {
        number,
        name,
        kind,
        repeated: true,
    }
}

const OWNER_REFERENCE: &[Field] = &[
    f(5, "apiVersion", Kind::Str),
    f(1, "kind", Kind::Str),
    f(3, "name", Kind::Str),
    f(4, "uid", Kind::Str),
    f(6, "controller", Kind::Bool),
    f(7, "blockOwnerDeletion", Kind::Bool),
];

const MANAGED_FIELDS: &[Field] = &[
    f(1, "manager", Kind::Str),
    f(2, "operation", Kind::Str),
    f(3, "apiVersion", Kind::Str),
    f(4, "time", Kind::Time),
    f(6, "fieldsType", Kind::Str),
    f(7, "fieldsV1", Kind::Msg(FIELDS_V1)),
    f(8, "subresource", Kind::Str),
];

/// `FieldsV1` carries its JSON in field 1; unwrapped when converted.
const FIELDS_V1: &[Field] = &[f(1, "Raw", Kind::RawJson)];

const OBJECT_META: &[Field] = &[
    f(1, "name", Kind::Str),
    f(2, "generateName", Kind::Str),
    f(3, "namespace", Kind::Str),
    f(4, "selfLink", Kind::Str),
    f(5, "uid", Kind::Str),
    f(6, "resourceVersion", Kind::Str),
    f(7, "generation", Kind::Int),
    f(8, "creationTimestamp", Kind::Time),
    f(9, "deletionTimestamp", Kind::Time),
    f(10, "deletionGracePeriodSeconds", Kind::Int),
    f(11, "labels", Kind::StrMap),
    f(12, "annotations", Kind::StrMap),
    r(13, "ownerReferences", Kind::Msg(OWNER_REFERENCE)),
    r(14, "finalizers", Kind::Str),
    r(17, "managedFields", Kind::Msg(MANAGED_FIELDS)),
];

const NAMESPACE: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    f(2, "spec", Kind::Msg(&[r(1, "finalizers", Kind::Str)])),
    f(3, "status", Kind::Msg(&[f(1, "phase", Kind::Str)])),
];

const SECRET: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    f(2, "data", Kind::BytesMap),
    f(3, "type", Kind::Str),
    f(4, "stringData", Kind::StrMap),
    f(5, "immutable", Kind::Bool),
];

const CONFIG_MAP: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    f(2, "data", Kind::StrMap),
    f(3, "binaryData", Kind::BytesMap),
    f(4, "immutable", Kind::Bool),
];

const OBJECT_REFERENCE: &[Field] = &[
    f(1, "kind", Kind::Str),
    f(2, "namespace", Kind::Str),
    f(3, "name", Kind::Str),
    f(4, "uid", Kind::Str),
    f(5, "apiVersion", Kind::Str),
    f(6, "resourceVersion", Kind::Str),
    f(7, "fieldPath", Kind::Str),
];

const SERVICE_ACCOUNT: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    r(2, "secrets", Kind::Msg(OBJECT_REFERENCE)),
    r(3, "imagePullSecrets", Kind::Msg(&[f(1, "name", Kind::Str)])),
    f(4, "automountServiceAccountToken", Kind::Bool),
];

const DELETE_OPTIONS: &[Field] = &[
    f(1, "gracePeriodSeconds", Kind::Int),
    f(
        2,
        "preconditions",
        Kind::Msg(&[f(1, "uid", Kind::Str), f(2, "resourceVersion", Kind::Str)]),
    ),
    f(3, "orphanDependents", Kind::Bool),
    f(4, "propagationPolicy", Kind::Str),
    r(5, "dryRun", Kind::Str),
];

const TYPE_META: &[Field] = &[f(1, "apiVersion", Kind::Str), f(2, "kind", Kind::Str)];

/// The kinds accepted as protobuf, by (apiVersion, kind).
fn message_of(api_version: &str, kind: &str) -> Option<&'static [Field]> {
    Some(match (api_version, kind) {
        ("v1", "Namespace") => NAMESPACE,
        ("v1", "Secret") => SECRET,
        ("v1", "ConfigMap") => CONFIG_MAP,
        ("v1", "ServiceAccount") => SERVICE_ACCOUNT,
        ("v1" | "meta.k8s.io/v1", "DeleteOptions") => DELETE_OPTIONS,
        _ => return None,
    })
}

const ACCEPTED: &str = "Namespace, Secret, ConfigMap, ServiceAccount and DeleteOptions";
/// How the refusal of a kind not decoded here begins (a 415, not a 400).
pub const UNSUPPORTED_KIND: &str = "protobuf bodies are accepted for";

fn err(e: prost::DecodeError) -> String {
    format!("invalid protobuf: {e}")
}

fn take_bytes(buf: &mut &[u8]) -> Result<Vec<u8>, String> {
    let len = decode_varint(buf).map_err(err)? as usize;
    if len > buf.remaining() {
        return Err("invalid protobuf: a field runs past the end of the body".into());
    }
    let bytes = buf[..len].to_vec();
    buf.advance(len);
    Ok(bytes)
}

fn skip(buf: &mut &[u8], wire: WireType) -> Result<(), String> {
    match wire {
        WireType::Varint => decode_varint(buf).map(drop).map_err(err),
        WireType::LengthDelimited => take_bytes(buf).map(drop),
        WireType::SixtyFourBit if buf.remaining() >= 8 => {
            buf.advance(8);
            Ok(())
        }
        WireType::ThirtyTwoBit if buf.remaining() >= 4 => {
            buf.advance(4);
            Ok(())
        }
        _ => Err("invalid protobuf: truncated or unsupported field".into()),
    }
}

fn utf8(bytes: Vec<u8>) -> Result<String, String> {
    String::from_utf8(bytes).map_err(|_| "invalid protobuf: a string is not UTF-8".to_string())
}

/// A map entry message: key 1, value 2.
fn entry(bytes: &[u8], value_is_bytes: bool) -> Result<(String, Value), String> {
    let mut buf = bytes;
    let (mut key, mut value) = (String::new(), Vec::new());
    while buf.has_remaining() {
        let (number, wire) = decode_key(&mut buf).map_err(err)?;
        match (number, wire) {
            (1, WireType::LengthDelimited) => key = utf8(take_bytes(&mut buf)?)?,
            (2, WireType::LengthDelimited) => value = take_bytes(&mut buf)?,
            (_, wire) => skip(&mut buf, wire)?,
        }
    }
    let value = if value_is_bytes {
        Value::String(STANDARD.encode(value))
    } else {
        Value::String(utf8(value)?)
    };
    Ok((key, value))
}

fn time(bytes: &[u8]) -> Result<Value, String> {
    let mut buf = bytes;
    let mut seconds = 0i64;
    while buf.has_remaining() {
        let (number, wire) = decode_key(&mut buf).map_err(err)?;
        match (number, wire) {
            (1, WireType::Varint) => seconds = decode_varint(&mut buf).map_err(err)? as i64,
            (_, wire) => skip(&mut buf, wire)?,
        }
    }
    Ok(Value::String(crate::meta::rfc3339(seconds)))
}

fn message(bytes: &[u8], fields: &[Field]) -> Result<Value, String> {
    let mut out = Map::new();
    let mut buf = bytes;
    while buf.has_remaining() {
        let (number, wire) = decode_key(&mut buf).map_err(err)?;
        let Some(field) = fields.iter().find(|f| f.number == number) else {
            skip(&mut buf, wire)?;
            continue;
        };
        let value = match (field.kind, wire) {
            (Kind::Int, WireType::Varint) => json!(decode_varint(&mut buf).map_err(err)? as i64),
            (Kind::Bool, WireType::Varint) => json!(decode_varint(&mut buf).map_err(err)? != 0),
            (_, WireType::LengthDelimited) => {
                let bytes = take_bytes(&mut buf)?;
                match field.kind {
                    Kind::Str => Value::String(utf8(bytes)?),
                    Kind::RawJson => serde_json::from_slice(&bytes)
                        .map_err(|e| format!("invalid protobuf: FieldsV1 is not JSON: {e}"))?,
                    Kind::Time => time(&bytes)?,
                    Kind::Msg(inner) => {
                        let value = message(&bytes, inner)?;
                        // FieldsV1 is its raw JSON on the wire, the object itself in JSON.
                        match value.get("Raw") {
                            Some(raw) if inner.len() == 1 => raw.clone(),
                            _ => value,
                        }
                    }
                    Kind::StrMap | Kind::BytesMap => {
                        let (k, v) = entry(&bytes, matches!(field.kind, Kind::BytesMap))?;
                        let map = out.entry(field.name).or_insert_with(|| json!({}));
                        if let Some(map) = map.as_object_mut() {
                            map.insert(k, v);
                        }
                        continue;
                    }
                    Kind::Int | Kind::Bool => {
                        return Err(format!(
                            "invalid protobuf: field {} has the wrong wire type",
                            field.name
                        ));
                    }
                }
            }
            (_, _) => {
                return Err(format!(
                    "invalid protobuf: field {} has the wrong wire type",
                    field.name
                ));
            }
        };
        if field.repeated {
            let list = out.entry(field.name).or_insert_with(|| json!([]));
            if let Some(list) = list.as_array_mut() {
                list.push(value);
            }
        } else {
            out.insert(field.name.to_string(), value);
        }
    }
    Ok(Value::Object(out))
}

/// Decode a protobuf body (magic + `runtime.Unknown`) into the JSON object it carries.
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let Some(mut buf) = body.strip_prefix(MAGIC) else {
        return Err("invalid protobuf: the body does not start with the k8s magic".into());
    };
    let (mut type_meta, mut raw) = (Value::Null, Vec::new());
    while buf.has_remaining() {
        let (number, wire) = decode_key(&mut buf).map_err(err)?;
        match (number, wire) {
            (1, WireType::LengthDelimited) => {
                type_meta = message(&take_bytes(&mut buf)?, TYPE_META)?
            }
            (2, WireType::LengthDelimited) => raw = take_bytes(&mut buf)?,
            (_, wire) => skip(&mut buf, wire)?,
        }
    }
    let api_version = type_meta["apiVersion"].as_str().unwrap_or("").to_string();
    let kind = type_meta["kind"].as_str().unwrap_or("").to_string();
    let Some(fields) = message_of(&api_version, &kind) else {
        return Err(format!(
            "{UNSUPPORTED_KIND} {ACCEPTED} only (got {api_version} {kind}); send application/json"
        ));
    };
    let mut object = message(&raw, fields)?;
    if let Some(o) = object.as_object_mut() {
        o.insert("apiVersion".into(), json!(api_version));
        o.insert("kind".into(), json!(kind));
    }
    Ok(object)
}

#[cfg(test)]
mod tests {
    use prost::encoding::{encode_key, encode_varint};

    use super::*;

    fn bytes_field(out: &mut Vec<u8>, number: u32, value: &[u8]) {
        encode_key(number, WireType::LengthDelimited, out);
        encode_varint(value.len() as u64, out);
        out.extend_from_slice(value);
    }

    fn map_entry(key: &str, value: &[u8]) -> Vec<u8> {
        let mut entry = Vec::new();
        bytes_field(&mut entry, 1, key.as_bytes());
        bytes_field(&mut entry, 2, value);
        entry
    }

    /// A Helm release Secret as client-go's typed client encodes it.
    fn helm_secret() -> Vec<u8> {
        let mut meta = Vec::new();
        bytes_field(&mut meta, 1, b"sh.helm.release.v1.demo.v1");
        bytes_field(&mut meta, 3, b"demo");
        bytes_field(&mut meta, 11, &map_entry("owner", b"helm"));
        bytes_field(&mut meta, 11, &map_entry("status", b"deployed"));
        let mut created = Vec::new();
        encode_key(1, WireType::Varint, &mut created);
        encode_varint(1_764_547_200, &mut created);
        bytes_field(&mut meta, 8, &created);
        let mut secret = Vec::new();
        bytes_field(&mut secret, 1, &meta);
        bytes_field(&mut secret, 2, &map_entry("release", b"\x00\x01binary"));
        bytes_field(&mut secret, 3, b"helm.sh/release.v1");
        encode_key(5, WireType::Varint, &mut secret);
        encode_varint(1, &mut secret);
        let mut type_meta = Vec::new();
        bytes_field(&mut type_meta, 1, b"v1");
        bytes_field(&mut type_meta, 2, b"Secret");
        let mut body = MAGIC.to_vec();
        bytes_field(&mut body, 1, &type_meta);
        bytes_field(&mut body, 2, &secret);
        bytes_field(&mut body, 4, b"application/vnd.kubernetes.protobuf");
        body
    }

    #[test]
    fn a_helm_release_secret_decodes_to_its_json_object() {
        let secret = decode(&helm_secret()).unwrap();
        assert_eq!(
            secret,
            json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "sh.helm.release.v1.demo.v1", "namespace": "demo",
                             "labels": {"owner": "helm", "status": "deployed"},
                             "creationTimestamp": "2025-12-01T00:00:00Z"},
                "data": {"release": STANDARD.encode(b"\x00\x01binary")},
                "type": "helm.sh/release.v1",
                "immutable": true,
            })
        );
    }

    #[test]
    fn other_kinds_and_garbage_are_refused_with_a_reason() {
        let mut body = MAGIC.to_vec();
        let mut type_meta = Vec::new();
        bytes_field(&mut type_meta, 1, b"apps/v1");
        bytes_field(&mut type_meta, 2, b"Deployment");
        bytes_field(&mut body, 1, &type_meta);
        assert!(decode(&body).unwrap_err().contains("send application/json"));
        assert!(
            decode(b"{\"kind\":\"Secret\"}")
                .unwrap_err()
                .contains("magic")
        );
        let mut truncated = helm_secret();
        truncated.truncate(truncated.len() - 10);
        assert!(decode(&truncated).is_err());
        for cut in 0..helm_secret().len() {
            let _ = decode(&helm_secret()[..cut]);
        }
    }
}
