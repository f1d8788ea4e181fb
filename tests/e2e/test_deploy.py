# test_deploy.py: what can be checked of the deployment files without a Docker engine or a
# cluster: the Dockerfile's stages, user, health check and build command; compose's GPU
# reservation; the k8s objects' GPU limit, probes, volume and selectors; the systemd unit
# (systemd-analyze verify where present); the README says how to run each.
import configparser
import glob
import os
import re
import shutil
import subprocess
import tempfile

import e2e_lib as L
import ops_lib as O
from e2e_lib import CHECK

O.cpu_label_only("test_deploy")
O.with_debian_python("yaml")

SRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def read(*path):
    with open(os.path.join(SRC, *path)) as f:
        return f.read()


def dockerfile_stages(text):
    """[(base image, stage name, [(INSTRUCTION, args)])] with ARG defaults substituted."""
    args, stages = {}, []
    for line in re.sub(r"\\\n", " ", text).splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instr, _, rest = line.partition(" ")
        instr, rest = instr.upper(), rest.strip()
        if instr == "ARG" and not stages:
            k, _, v = rest.partition("=")
            args[k] = v
            continue
        rest = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), rest)
        if instr == "FROM":
            m = re.match(r"(\S+)(?:\s+AS\s+(\S+))?$", rest, re.I)
            stages.append((m.group(1), m.group(2), []))
        elif stages:
            stages[-1][2].append((instr, rest))
    return stages


def check_dockerfile():
    stages = dockerfile_stages(read("Dockerfile"))
    if not CHECK.ok(len(stages) >= 2, "Dockerfile is multi-stage: %d FROM" % len(stages)):
        return None
    (b_img, b_name, b_ins), (r_img, _, r_ins) = stages[0], stages[-1]
    CHECK.ok(re.match(r"nvidia/cuda:\S+-devel-", b_img), "build stage on an nvidia/cuda devel image: %s" % b_img)
    CHECK.ok(re.match(r"nvidia/cuda:\S+-runtime-", r_img), "runtime stage on an nvidia/cuda runtime image: %s" % r_img)
    runs = " ".join(a for i, a in b_ins if i == "RUN")
    CHECK.ok("./gpured.sh build" in runs, "build stage runs ./gpured.sh build: %r" % runs[:200])
    copies = [a for i, a in r_ins if i == "COPY"]
    CHECK.ok(any(("--from=%s" % b_name) in a and "gpured" in a for a in copies), "runtime copies the binary from %s: %r" % (b_name, copies))
    users = [a for i, a in r_ins if i == "USER"]
    CHECK.ok(users and users[-1].split(":")[0] not in ("root", "0"), "runtime USER is not root: %r" % users)
    hc = [a for i, a in r_ins if i == "HEALTHCHECK"]
    CHECK.ok(hc and "/healthz" in hc[-1], "HEALTHCHECK on /healthz: %r" % hc)
    env = dict(kv.split("=", 1) for i, a in r_ins if i == "ENV" for kv in a.split())
    CHECK.eq(env.get("GPURED_BIND"), "0.0.0.0", "the container listens beyond its loopback")
    data = env.get("GPURED_DATA_DIR")
    CHECK.ok(any(i == "VOLUME" and data and data in a for i, a in r_ins), "VOLUME is the data dir %r" % data)
    CHECK.ok(any(i == "EXPOSE" and env.get("GPURED_PORT", "8080") in a for i, a in r_ins), "EXPOSE the port")
    ep = " ".join(a for i, a in r_ins if i in ("ENTRYPOINT", "CMD"))
    CHECK.ok("gpured" in ep and "serve" in ep, "the image starts gpured serve: %r" % ep)
    # ./gpured.sh build exists and installs no test-only packages (chromium is a snap on Ubuntu)
    sh = read("gpured.sh")
    CHECK.ok(re.search(r"^\s*build\)\s*\n\s*install_missing \"\$\{PKGS\[@\]\}\"\s*\n\s*build", sh, re.M),
             "gpured.sh has a build command that installs PKGS only")
    CHECK.eq(subprocess.run(["bash", "-n", os.path.join(SRC, "gpured.sh")]).returncode, 0, "gpured.sh parses")
    ignore = read(".dockerignore").split()
    for p in (".git", "build", "build-*", "gpured-data"):
        CHECK.ok(p in ignore, ".dockerignore leaves out %s" % p)
    return data


def check_compose(yaml, data_dir):
    c = yaml.safe_load(read("deploy", "compose.yaml"))
    svc = c["services"]["gpured"]
    devs = svc["deploy"]["resources"]["reservations"]["devices"]
    CHECK.ok(any(d.get("driver") == "nvidia" and "gpu" in d.get("capabilities", []) and (d.get("count") or d.get("device_ids"))
                 for d in devs), "compose reserves an nvidia GPU: %r" % devs)
    ctx = os.path.normpath(os.path.join(SRC, "deploy", svc["build"]["context"]))
    CHECK.eq(ctx, SRC, "compose builds from the repository root")
    CHECK.ok(os.path.exists(os.path.join(ctx, svc["build"].get("dockerfile", "Dockerfile"))), "compose's Dockerfile exists")
    vols = [v.split(":") for v in svc.get("volumes", [])]
    CHECK.ok(any(len(v) >= 2 and v[1] == data_dir and v[0] in (c.get("volumes") or {}) for v in vols),
             "compose mounts a named volume on %s: %r" % (data_dir, vols))
    CHECK.ok(any(str(p).endswith(":8080") for p in svc.get("ports", [])), "compose publishes 8080: %r" % svc.get("ports"))
    hc = " ".join(svc.get("healthcheck", {}).get("test", []))
    CHECK.ok("/readyz" in hc or "/healthz" in hc, "compose health check %r" % hc)


def check_k8s(yaml):
    objs = [o for f in sorted(glob.glob(os.path.join(SRC, "deploy", "k8s", "*.yaml")))
            for o in yaml.safe_load_all(open(f)) if o]
    by_kind = {}
    for o in objs:
        by_kind.setdefault(o.get("kind"), []).append(o)
    for kind in ("Deployment", "PersistentVolumeClaim", "Service"):
        CHECK.eq(len(by_kind.get(kind, [])), 1, "one %s in deploy/k8s" % kind)
    if not all(by_kind.get(k) for k in ("Deployment", "PersistentVolumeClaim", "Service")):
        return
    dep, pvc, svc = by_kind["Deployment"][0], by_kind["PersistentVolumeClaim"][0], by_kind["Service"][0]
    CHECK.eq(dep["apiVersion"], "apps/v1", "Deployment apiVersion")
    spec, pod = dep["spec"], dep["spec"]["template"]["spec"]
    CHECK.eq(spec.get("strategy", {}).get("type"), "Recreate", "Recreate: never two pods on one SQLite store")
    labels = dep["spec"]["template"]["metadata"]["labels"]
    CHECK.ok(all(labels.get(k) == v for k, v in spec["selector"]["matchLabels"].items()), "Deployment selector matches its pods")
    CHECK.ok(all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()), "Service selector matches the pods")
    CHECK.ok(pod.get("securityContext", {}).get("runAsNonRoot") is True, "pod runs as non-root")
    c = pod["containers"][0]
    CHECK.eq(str(c["resources"]["limits"].get("nvidia.com/gpu")), "1", "container limits nvidia.com/gpu: 1")
    ports = {p.get("name"): p["containerPort"] for p in c["ports"]}
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    CHECK.eq(env.get("GPURED_BIND"), "0.0.0.0", "pod listens beyond its loopback")
    CHECK.ok(str(env.get("GPURED_PORT", "8080")) in [str(p) for p in ports.values()], "GPURED_PORT is the containerPort")
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        g = c.get(probe, {}).get("httpGet", {})
        CHECK.eq(g.get("path"), path, "%s path" % probe)
        CHECK.ok(g.get("port") in ports or g.get("port") in ports.values(), "%s port %r is the container's" % (probe, g.get("port")))
    tp = svc["spec"]["ports"][0]["targetPort"]
    CHECK.ok(tp in ports or tp in ports.values(), "Service targetPort %r is the container's" % tp)
    claim = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    data = env.get("GPURED_DATA_DIR")
    CHECK.ok(data in mounts and claim.get(mounts[data]) == pvc["metadata"]["name"],
             "the data dir %r is mounted from the PVC %s" % (data, pvc["metadata"]["name"]))
    CHECK.ok("ReadWriteOnce" in pvc["spec"]["accessModes"] and pvc["spec"]["resources"]["requests"].get("storage"),
             "PVC is ReadWriteOnce with a size")
    kust = yaml.safe_load(read("deploy", "k8s", "kustomization.yaml"))
    files = sorted(os.path.basename(f) for f in glob.glob(os.path.join(SRC, "deploy", "k8s", "*.yaml")))
    CHECK.eq(sorted(kust["resources"] + ["kustomization.yaml"]), files, "kustomization lists every manifest")


def check_systemd():
    path = os.path.join(SRC, "deploy", "gpured.service")
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str
    unit.read(path)
    svc = unit["Service"]
    CHECK.ok(re.match(r"^/\S+/gpured serve\b", svc.get("ExecStart", "")), "ExecStart runs gpured serve: %r" % svc.get("ExecStart"))
    CHECK.ok(svc.get("DynamicUser") == "yes" or svc.get("User") not in (None, "root"), "the unit does not run as root")
    env = dict(kv.split("=", 1) for kv in svc.get("Environment", "").split())
    CHECK.eq(env.get("GPURED_DATA_DIR"), "/var/lib/" + svc.get("StateDirectory", "?"), "data dir is the StateDirectory")
    CHECK.ok(svc.get("Restart") in ("on-failure", "always"), "Restart=%r" % svc.get("Restart"))
    CHECK.ok(unit.has_section("Install") and unit["Install"].get("WantedBy"), "[Install] WantedBy")
    tool = shutil.which("systemd-analyze")
    if not tool or not L.BIN:
        print("not run: systemd-analyze verify (systemd-analyze not installed)", flush=True)
        return
    d = tempfile.mkdtemp(prefix="gpured-unit-")
    try:
        copy = os.path.join(d, "gpured.service")  # the unit as installed, with the binary this build made
        with open(copy, "w") as f:
            f.write(read("deploy", "gpured.service").replace("/usr/local/bin/gpured", os.path.abspath(L.BIN)))
        p = subprocess.run([tool, "verify", copy], capture_output=True, text=True)
        CHECK.ok(p.returncode == 0 and not p.stderr.strip(), "systemd-analyze verify: rc %d %s" % (p.returncode, p.stderr.strip()[:400]))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def check_readme():
    text = read("README.md")
    for want in ("docker build", "deploy/compose.yaml", "deploy/k8s", "deploy/gpured.service", "/metrics", "/openapi.json"):
        CHECK.ok(want in text, "README says how to use %s" % want)


def main():
    import yaml
    data_dir = check_dockerfile()
    check_compose(yaml, data_dir)
    check_k8s(yaml)
    check_systemd()
    check_readme()
    print("not run: docker build / compose up / kubectl apply (no Docker engine or cluster here)", flush=True)


if __name__ == "__main__":
    L.run_suite(main)
