# test_deploy.py: what can be checked of the deployment files without a Docker engine or a
# cluster: the Dockerfile's stages, user, health check and build command; compose's GPU
# reservation; the k8s objects' GPU limit, probes, volume and selectors; the systemd unit
# (systemd-analyze verify where present); the README says how to run each. Bearer tokens: every
# container deploy reads them from the secret file GPURED_TOKENS_FILE names (compose secret, k8s
# Secret mounted read-only), none is in git or the image, the example file follows the format;
# and the real binary, set up as the image sets it (0.0.0.0), refuses to start without tokens
# and serves with the example file.
import configparser
import glob
import os
import re
import shutil
import subprocess
import tempfile
import time

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


TENANT = re.compile(r"^[a-z0-9_-]{1,64}$")
TOKEN = re.compile(r"^[\x21-\x7e]{16,256}$")


def parse_tokens(text):
    """[(tenant, token, admin)] of a tokens file by the rules of docs/API.md; a malformed line
    is a failed check naming its line number."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        f = line.split()
        if not f or f[0].startswith("#"):
            continue
        ok = len(f) in (2, 3) and TENANT.match(f[0]) and TOKEN.match(f[1]) and (len(f) == 2 or f[2] == "admin")
        if CHECK.ok(ok, "tokens example line %d is TENANT TOKEN [admin]" % n):
            out.append((f[0], f[1], len(f) == 3))
    return out


def check_tokens_example():
    """The example names the real file it stands for, which git and the image leave out."""
    text = read("deploy", "gpured-tokens.example")
    toks = parse_tokens(text)
    CHECK.ok(toks and any(a for _, _, a in toks) and any(not a for _, _, a in toks),
             "the example has a tenant token and an admin one: %r" % [(t, a) for t, _, a in toks])
    CHECK.eq(len({t for _, t, _ in toks}), len(toks), "the example's tokens differ")
    CHECK.ok("openssl rand" in text, "the example says how to make a token (openssl rand)")
    ignored = None
    if shutil.which("git") and os.path.exists(os.path.join(SRC, ".git")):
        p = subprocess.run(["git", "-C", SRC, "check-ignore", "-q", "deploy/gpured-tokens"])
        ignored = p.returncode == 0
        p = subprocess.run(["git", "-C", SRC, "check-ignore", "-q", "deploy/gpured-tokens.example"])
        CHECK.ok(p.returncode == 1, "git keeps deploy/gpured-tokens.example")
    else:
        ignored = any(ln.strip() in ("gpured-tokens", "/deploy/gpured-tokens", "deploy/gpured-tokens")
                      for ln in read(".gitignore").splitlines())
    CHECK.ok(ignored, "git ignores deploy/gpured-tokens")
    CHECK.ok("**/gpured-tokens" in read(".dockerignore").split(), ".dockerignore leaves out every gpured-tokens")
    return toks


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
    tokens = env.get("GPURED_TOKENS_FILE")
    CHECK.eq(tokens, "/run/secrets/gpured-tokens", "the image reads its tokens from the secret file by default")
    CHECK.ok("GPURED_INSECURE_NO_AUTH" not in env, "the image does not turn auth off")
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
    return data, tokens


def check_compose(yaml, data_dir, tokens_file):
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
    # the tokens: a file secret (the gitignored file the example stands for) at GPURED_TOKENS_FILE
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(e.split("=", 1) for e in env)
    CHECK.eq(env.get("GPURED_TOKENS_FILE", tokens_file), tokens_file, "compose's GPURED_TOKENS_FILE is the image's")
    CHECK.ok("GPURED_INSECURE_NO_AUTH" not in env, "compose does not turn auth off")
    targets = {}
    for sec in svc.get("secrets") or []:
        src = sec if isinstance(sec, str) else sec.get("source")
        tgt = src if isinstance(sec, str) else sec.get("target") or src
        targets[tgt if tgt.startswith("/") else "/run/secrets/" + tgt] = src
    src = targets.get(tokens_file)
    top = (c.get("secrets") or {}).get(src) or {}
    if CHECK.ok(src and top.get("file"), "compose gives the service a file secret at %s: %r" % (tokens_file, targets)):
        f = os.path.normpath(os.path.join(SRC, "deploy", top["file"]))
        CHECK.eq(f, os.path.join(SRC, "deploy", "gpured-tokens"), "compose's secret is the file deploy/gpured-tokens")
        CHECK.ok(os.path.exists(f + ".example"), "an example stands next to compose's secret file")


def check_k8s(yaml, tokens_file):
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
    # the tokens: a Secret (made with kubectl, never in these files) mounted read-only at the
    # path GPURED_TOKENS_FILE names, readable by the pod's group only; the probes need no token
    CHECK.eq(env.get("GPURED_TOKENS_FILE", tokens_file), tokens_file, "the pod's GPURED_TOKENS_FILE is the image's")
    tokens_file = env.get("GPURED_TOKENS_FILE", tokens_file)
    CHECK.ok("GPURED_INSECURE_NO_AUTH" not in env, "the pod does not turn auth off")
    CHECK.ok(c.get("startupProbe", {}).get("httpGet", {}).get("path") in (None, "/healthz", "/readyz"),
             "startupProbe needs no token")
    secrets = {v["name"]: v["secret"] for v in pod["volumes"] if "secret" in v}
    mount = next((m for m in c["volumeMounts"] if m["name"] in secrets and (
        m["mountPath"] == tokens_file and m.get("subPath") or tokens_file.startswith(m["mountPath"].rstrip("/") + "/"))), None)
    if CHECK.ok(mount, "a Secret is mounted at %s: %r" % (tokens_file, c["volumeMounts"])):
        CHECK.ok(mount.get("readOnly") is True, "the tokens are mounted readOnly")
        vol = secrets[mount["name"]]
        rel = mount.get("subPath") or os.path.relpath(tokens_file, mount["mountPath"])
        items = {i["path"]: i for i in vol.get("items") or []}
        key = items[rel]["key"] if rel in items else rel
        CHECK.ok(not items or rel in items, "the Secret's items put a file at %s: %r" % (rel, list(items)))
        CHECK.ok(not vol.get("optional"), "the Secret is not optional (no pod without tokens)")
        mode = (items.get(rel) or {}).get("mode", vol.get("defaultMode", 0o644))
        ctx = pod.get("securityContext", {})
        CHECK.ok(mode & 0o007 == 0, "the tokens file is not world-readable: %o" % mode)
        CHECK.ok(mode & 0o040 and ctx.get("fsGroup") is not None and mode & 0o222 == 0,
                 "the tokens file is read-only and readable by the pod's fsGroup %r: %o" % (ctx.get("fsGroup"), mode))
        name = vol.get("secretName")
        CHECK.ok(re.search(r"kubectl create secret generic %s --from-file=%s=deploy/gpured-tokens" % (re.escape(name), re.escape(key)),
                           read("README.md")), "the README creates the Secret %s with the key %s" % (name, key))
    for kind in by_kind:
        for o in by_kind[kind] if kind == "Secret" else []:
            CHECK.ok(not o.get("data") and not o.get("stringData"), "no Secret with data in deploy/k8s: %s" % o["metadata"]["name"])
    CHECK.ok("ReadWriteOnce" in pvc["spec"]["accessModes"] and pvc["spec"]["resources"]["requests"].get("storage"),
             "PVC is ReadWriteOnce with a size")
    kust = yaml.safe_load(read("deploy", "k8s", "kustomization.yaml"))
    files = sorted(os.path.basename(f) for f in glob.glob(os.path.join(SRC, "deploy", "k8s", "*.yaml")))
    CHECK.eq(sorted(kust["resources"] + ["kustomization.yaml"]), files, "kustomization lists every manifest")
    for gen in kust.get("secretGenerator") or []:
        for f in gen.get("files", []):
            CHECK.ok(f.split("=")[-1] == "gpured-tokens", "a secretGenerator reads only a gitignored gpured-tokens: %r" % f)


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
    CHECK.ok(env.get("GPURED_BIND", "127.0.0.1").startswith("127.") or env.get("GPURED_TOKENS_FILE") or svc.get("LoadCredential"),
             "the unit binds the loopback or has tokens: %r" % env.get("GPURED_BIND"))
    # the tokens example, commented out: a credential, and GPURED_TOKENS_FILE naming it
    text = read("deploy", "gpured.service")
    cred = re.search(r"^#\s*LoadCredential=(\w+):(/\S+)$", text, re.M)
    envl = re.search(r"^#\s*Environment=GPURED_TOKENS_FILE=%d/(\w+)$", text, re.M)
    CHECK.ok(cred and envl and cred.group(1) == envl.group(1),
             "the unit shows LoadCredential= and GPURED_TOKENS_FILE=%%d/NAME for one credential: %r %r" % (cred, envl))
    CHECK.ok(svc.get("Restart") in ("on-failure", "always"), "Restart=%r" % svc.get("Restart"))
    CHECK.ok(unit.has_section("Install") and unit["Install"].get("WantedBy"), "[Install] WantedBy")
    tool = shutil.which("systemd-analyze")
    if not tool or not L.BIN:
        print("not run: systemd-analyze verify (systemd-analyze not installed)", flush=True)
        return
    d = tempfile.mkdtemp(prefix="gpured-unit-")
    try:
        copy = os.path.join(d, "gpured.service")  # the unit as installed, with the binary this build made
        unit_text = text.replace("/usr/local/bin/gpured", os.path.abspath(L.BIN))
        # as is, and with the tokens lines uncommented
        uncommented = re.sub(r"^#\s*(LoadCredential=|Environment=GPURED_TOKENS_FILE=)", r"\1", unit_text, flags=re.M)
        for what, body in (("as is", unit_text), ("with its tokens lines", uncommented)):
            with open(copy, "w") as f:
                f.write(body)
            p = subprocess.run([tool, "verify", copy], capture_output=True, text=True)
            CHECK.ok(p.returncode == 0 and not p.stderr.strip(),
                     "systemd-analyze verify (%s): rc %d %s" % (what, p.returncode, p.stderr.strip()[:400]))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def check_readme():
    text = read("README.md")
    for want in ("docker build", "deploy/compose.yaml", "deploy/k8s", "deploy/gpured.service", "/metrics", "/openapi.json"):
        CHECK.ok(want in text, "README says how to use %s" % want)
    for want in ("openssl rand", "deploy/gpured-tokens", "/run/secrets/gpured-tokens", 'Authorization: Bearer $TOKEN',
                 "GPURED_INSECURE_NO_AUTH=1", "LoadCredential="):
        CHECK.ok(want in text, "README says %s" % want)


class AnyBindServer(L.Server):
    """A Server whose bind, port and data dir come from the environment, as in the image."""

    def __init__(self, env, name):
        super().__init__(name=name, flags=False)
        self.env = dict(clean_env(), GPURED_PORT="0", GPURED_DATA_DIR=self.data_dir, **env)


def clean_env():
    """This environment without any GPURED_ setting the caller may have (GPURED_BIN aside)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("GPURED_") or k in ("GPURED_BIN", "GPURED_TEST_DEVICE")}


def refuses(what, env, say):
    """gpured serve with env must exit non-zero before listening, saying each of say."""
    d = tempfile.mkdtemp(prefix="gpured-deploy-")
    try:
        e = dict(clean_env(), GPURED_PORT="0", GPURED_DATA_DIR=d, **env)
        p = subprocess.Popen([L.BIN, "serve"], env=e, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        try:
            out, _ = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        CHECK.ok(p.returncode not in (0, None, -9) and "listening on" not in out,
                 "%s: gpured refuses to start (rc %r): %s" % (what, p.returncode, out.strip()[-300:]))
        for s in say:
            CHECK.ok(s.lower() in out.lower(), "%s: the refusal names %s: %s" % (what, s, out.strip()[-300:]))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def check_cli():
    """gpured --help lists the commands and every option of serve; a wrong command is named."""
    if not L.BIN:
        print("not run: the command line (GPURED_BIN not set)", flush=True)
        return
    top = subprocess.run([L.BIN, "--help"], capture_output=True, text=True)
    serve = subprocess.run([L.BIN, "serve", "--help"], capture_output=True, text=True)
    flags = re.findall(r"^  (--[a-z-]+) ", serve.stderr, re.M)
    CHECK.ok(top.returncode == 0 and "serve" in top.stdout and "--version" in top.stdout,
             "gpured --help exits 0 listing the commands: %r" % top.stdout[:300])
    CHECK.ok(len(flags) > 20 and all(f in top.stdout for f in flags),
             "gpured --help lists every option of serve (%d): %r" % (len(flags), [f for f in flags if f not in top.stdout]))
    bad = subprocess.run([L.BIN, "srve"], capture_output=True, text=True)
    CHECK.ok(bad.returncode == 2 and "unknown command 'srve'" in bad.stderr,
             "a wrong command exits 2 and is named: %r" % bad.stderr[:200])


def check_binary(tokens_file, toks):
    """The real binary set up as the image sets it: on 0.0.0.0, no secret -> no start; the
    example file as the secret -> /healthz and /readyz open, the API only with a token; no
    tokens but GPURED_INSECURE_NO_AUTH=1 -> it starts, with a warning."""
    if not L.BIN:
        print("not run: the binary set up as the image (GPURED_BIN not set)", flush=True)
        return
    h = subprocess.run([L.BIN, "serve", "--help"], capture_output=True, text=True)
    if "GPURED_INSECURE_NO_AUTH" not in h.stdout + h.stderr:
        print("not run: the binary set up as the image (this gpured has no GPURED_INSECURE_NO_AUTH)", flush=True)
        return
    image = {"GPURED_BIND": "0.0.0.0"}
    gone = os.path.join(tempfile.mkdtemp(prefix="gpured-nosecret-"), os.path.basename(tokens_file))
    refuses("the image's settings without the secret mounted", dict(image, GPURED_TOKENS_FILE=gone), [gone])
    os.rmdir(os.path.dirname(gone))
    refuses("0.0.0.0 without tokens", image, ["token"])
    refuses("0.0.0.0 with GPURED_INSECURE_NO_AUTH=0", dict(image, GPURED_INSECURE_NO_AUTH="0"), ["token"])

    example = os.path.join(SRC, "deploy", "gpured-tokens.example")
    srv = AnyBindServer(dict(image, GPURED_TOKENS_FILE=example), "gpured-example-tokens").start()
    user = next((t for _, t, a in toks if not a), None)
    admin = next((t for _, t, a in toks if a), None)
    rs = srv.batch([dict(path="/healthz"), dict(path="/readyz"), dict(path="/v1/jobs"), dict(path="/metrics"),
                    dict(path="/v1/jobs", headers={"Authorization": "Bearer " + "x" * 32}),
                    dict(path="/v1/jobs", headers={"Authorization": "Bearer %s" % user}),
                    dict(path="/v1/jobs?tenant=alice", headers={"Authorization": "Bearer %s" % admin})])
    CHECK.eq([r.status for r in rs[:2]], [200, 200], "/healthz and /readyz (the probes) answer without a token")
    CHECK.eq([r.status for r in rs[2:5]], [401, 401, 401], "/v1/jobs, /metrics without a token or with a wrong one")
    CHECK.ok(rs[2].headers.get("www-authenticate", "").startswith("Bearer"), "401 says WWW-Authenticate: Bearer: %r" % rs[2].headers)
    CHECK.eq([r.status for r in rs[5:]], [200, 200], "the example's tenant and admin tokens are accepted")
    L.check_stop(srv)

    srv = AnyBindServer(dict(image, GPURED_INSECURE_NO_AUTH="1"), "gpured-insecure").start()
    CHECK.eq(srv.req("GET", "/v1/jobs").status, 200, "GPURED_INSECURE_NO_AUTH=1: the API answers without a token")
    time.sleep(0.2)
    CHECK.ok(any(re.search(r"\bwarn\b", ln) and re.search(r"auth|token", ln, re.I) for ln in srv.log),
             "GPURED_INSECURE_NO_AUTH=1 logs a warning about it")
    L.check_stop(srv)


def check_k8s_replicas(yaml):
    """The replicas overlay: three pods on the PostgreSQL store its Secret names, rolling updates,
    the datasets' volume ReadWriteMany, and PostgreSQL for evaluation; kustomize builds it where
    kubectl is installed."""
    kz = yaml.safe_load(read("deploy", "k8s-replicas", "kustomization.yaml"))
    CHECK.eq(sorted(kz.get("resources", [])), ["../k8s", "postgres.yaml"], "the overlay builds on deploy/k8s")
    dep = yaml.safe_load(read("deploy", "k8s-replicas", "deployment-patch.yaml"))["spec"]
    CHECK.eq((dep["replicas"], dep["strategy"]["type"]), (3, "RollingUpdate"), "three replicas, rolling updates")
    env = {e["name"]: e for e in dep["template"]["spec"]["containers"][0]["env"]}
    CHECK.eq(env.get("GPURED_STORE", {}).get("valueFrom", {}).get("secretKeyRef"), {"name": "gpured-postgres", "key": "url"},
             "the store's URL (with its password) comes from a Secret")
    pvc = yaml.safe_load(read("deploy", "k8s-replicas", "pvc-patch.yaml"))
    CHECK.eq(pvc["spec"]["accessModes"], ["ReadWriteMany"], "the replicas share the datasets' volume")
    kinds = [d["kind"] for d in yaml.safe_load_all(read("deploy", "k8s-replicas", "postgres.yaml"))]
    CHECK.eq(sorted(kinds), ["Service", "StatefulSet"], "PostgreSQL for evaluation")
    if shutil.which("kubectl"):
        p = subprocess.run(["kubectl", "kustomize", os.path.join(SRC, "deploy", "k8s-replicas")], capture_output=True,
                           text=True, timeout=120)
        if CHECK.eq(p.returncode, 0, "kubectl kustomize deploy/k8s-replicas: %s" % p.stderr[-300:]):
            built = {d["kind"]: d for d in yaml.safe_load_all(p.stdout)}
            env = [e["name"] for e in built["Deployment"]["spec"]["template"]["spec"]["containers"][0]["env"]]
            CHECK.ok({"GPURED_STORE", "GPURED_TOKENS_FILE"} <= set(env), "the built pods have the store and the tokens")
    compose = yaml.safe_load(read("deploy", "compose.yaml"))["services"]
    reps = [n for n, svc in compose.items() if "replicas" in svc.get("profiles", []) and n != "postgres"]
    CHECK.eq(len(reps), 2, "compose's profile replicas runs two replicas")
    CHECK.ok(all(compose[n]["environment"]["GPURED_STORE"].startswith("postgresql://") for n in reps),
             "on the postgres service")


def main():
    L.store_independent("test_deploy")
    import yaml
    toks = check_tokens_example()
    data_dir, tokens_file = check_dockerfile()
    check_compose(yaml, data_dir, tokens_file)
    check_k8s(yaml, tokens_file)
    check_k8s_replicas(yaml)
    check_systemd()
    check_readme()
    check_cli()
    check_binary(tokens_file, toks)
    print("not run here: compose up / kubectl apply (no Docker engine or cluster; tests/container builds and "
          "runs the image with podman)", flush=True)


if __name__ == "__main__":
    L.run_suite(main)
