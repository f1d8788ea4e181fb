# test_container.py: the image built from the project's Dockerfile with podman, on a Debian 12 base
# made here with debootstrap (no registry is reachable), and used as a user would (label
# container): it runs as a non-root user, refuses 0.0.0.0 without its tokens secret, serves a job
# posted from the host with a token and refuses one without, reports healthy, stops on SIGTERM
# within 10 s with exit 0 and its queued jobs kept, and a second container on the same /data volume
# reads the first one's jobs and datasets and runs its queued ones. The image's size and layers are
# printed, and it carries no compiler, headers or source. deploy/compose.yaml is validated by
# docker-compose's schema. Where podman cannot run containers, the suite skips and says why.
#
# The base image and podman's storage are kept in GPURED_CONTAINER_CACHE (default
# ~/.cache/gpured/containers) and reused while the base is there. This machine's podman needs the
# runc runtime and ulimits a container may keep: a containers.conf there names both.
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import e2e_lib as L  # noqa: E402
from e2e_lib import CHECK  # noqa: E402

SRC = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CACHE = os.environ.get("GPURED_CONTAINER_CACHE", os.path.expanduser("~/.cache/gpured/containers"))
BASE = "localhost/gpured-base:debian12"
IMAGE = "localhost/gpured:test-%d" % os.getpid()
TOKEN = "container-test-token-0123456789abcdef"
SECRET = "/run/secrets/gpured-tokens"
CONF = """[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
"""


def podman(*args, check=True, timeout=600):
    cmd = ["podman", "--root", os.path.join(CACHE, "storage"), "--runroot", os.path.join(CACHE, "run")] + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, CONTAINERS_CONF=os.path.join(CACHE, "containers.conf")))
    if check and r.returncode:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd[5:7]), r.returncode, (r.stderr or r.stdout)[-2000:]))
    return r


def usable():
    """Why podman cannot run containers here, or None."""
    missing = [t for t in ("podman", "runc", "debootstrap", "docker-compose") if not shutil.which(t)]
    if missing:
        return "%s not installed (./gpured.sh test installs them: apt-get install podman runc debootstrap " \
               "docker-compose)" % ", ".join(missing)
    if os.getuid() != 0:
        return "debootstrap and this storage setup need root; run as root"
    os.makedirs(CACHE, exist_ok=True)
    with open(os.path.join(CACHE, "containers.conf"), "w") as f:
        f.write(CONF)
    r = podman("info", check=False, timeout=120)
    if r.returncode:
        return "podman info fails: %s" % r.stderr.strip()[-500:]
    return None


def mirror():
    """The Debian mirror this machine's apt uses (the base reaches packages the same way)."""
    for path in ["/etc/apt/sources.list"] + sorted(
            os.path.join("/etc/apt/sources.list.d", f) for f in os.listdir("/etc/apt/sources.list.d")
            if f.endswith((".list", ".sources"))):
        try:
            for line in open(path):
                words = line.split()
                if words[:1] == ["deb"] and len(words) > 1:
                    return words[1]
                if words[:1] == ["URIs:"] and len(words) > 1 and "security" not in words[1]:
                    return words[1]
        except OSError:
            pass
    return "http://deb.debian.org/debian"


def base():
    """Debian 12 minbase as an image, made once: debootstrap, this machine's apt settings for
    reaching its mirror (Acquire:: lines), then podman import."""
    if podman("image", "exists", BASE, check=False).returncode == 0:
        print("base image %s: cached in %s" % (BASE, CACHE), flush=True)
        return
    t0 = time.monotonic()
    root = tempfile.mkdtemp(prefix="gpured-rootfs-")
    try:
        subprocess.run(["debootstrap", "--variant=minbase", "bookworm", root, mirror()], check=True,
                       capture_output=True, timeout=900)
        conf = os.path.join(root, "etc", "apt", "apt.conf.d", "90host-acquire")
        with open(conf, "w") as out:
            for name in sorted(os.listdir("/etc/apt/apt.conf.d")):
                try:
                    out.writelines(ln for ln in open(os.path.join("/etc/apt/apt.conf.d", name))
                                   if ln.startswith("Acquire::"))
                except (OSError, UnicodeDecodeError):
                    pass
        tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
        r = subprocess.run(["podman", "--root", os.path.join(CACHE, "storage"), "--runroot",
                            os.path.join(CACHE, "run"), "import", "-q", "-", BASE], stdin=tar.stdout,
                           capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, CONTAINERS_CONF=os.path.join(CACHE, "containers.conf")))
        tar.wait()
        if r.returncode:
            raise RuntimeError("podman import: %s" % r.stderr)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("base image %s made in %.0f s" % (BASE, time.monotonic() - t0), flush=True)


class Via:
    """e2e_lib's requests (curl) to a container's published port, with the token unless told not."""

    def __init__(self, port, token=TOKEN):
        self.base = "http://127.0.0.1:%d" % port
        self.token = token

    def req(self, method, path, body=None, headers=None, timeout=60):
        h = dict(headers or {})
        if self.token:
            h.setdefault("Authorization", "Bearer " + self.token)
        return L.http(self.base, method, path, body, h, timeout, may_fail=True)

    def get_json(self, path):
        return self.req("GET", path).json()


def up(name, port, volume, tokens):
    podman("run", "-d", "--name", name, "-p", "127.0.0.1:%d:8080" % port, "-v", "%s:/data" % volume,
           "-v", "%s:%s:ro" % (tokens, SECRET), IMAGE)
    srv = Via(port)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if srv.req("GET", "/readyz", timeout=5).status == 200:
            return srv
        time.sleep(0.2)
    raise RuntimeError("container %s not ready in 60 s: %s" % (name, podman("logs", name, check=False).stderr[-2000:]))


def check_image():
    size = int(podman("image", "inspect", "--format", "{{.Size}}", IMAGE).stdout.strip())
    print("image %s: %.1f MB; its layers, newest first:" % (IMAGE, size / 1e6), flush=True)
    print(podman("history", "--format", "{{.Size}}\t{{.CreatedBy}}", IMAGE).stdout[:3000], flush=True)
    who = podman("run", "--rm", "--entrypoint", "id", IMAGE).stdout.split()
    CHECK.ok(who and who[0].startswith("uid=") and not who[0].startswith("uid=0("),
             "the image runs as a non-root user: %r" % who)
    found = podman("run", "--rm", "--entrypoint", "sh", IMAGE, "-c",
                   "for t in cc gcc c++ g++ nvcc cmake make ld; do command -v $t; done; "
                   "find / -xdev \\( -name '*.h' -o -name '*.c' -o -name '*.cu' -o -name CMakeLists.txt \\) "
                   "-not -path '/proc/*' -not -path '/usr/share/doc/*' | head -5; ls -d /src 2>/dev/null",
                   check=False).stdout.split()
    CHECK.eq(found, [], "the runtime image carries no compiler, headers or source (docs' examples aside)")


def check_refuses(volume):
    r = podman("run", "--rm", "-v", "%s:/data" % volume, IMAGE, check=False, timeout=60)
    CHECK.ok(r.returncode != 0, "without the tokens secret the container exits at once (exit %d)" % r.returncode)
    CHECK.ok(SECRET in r.stderr or "tokens" in r.stderr,
             "and says why, naming the tokens file: %r" % r.stderr.strip()[-300:])


def check_serving(name, srv):
    ds = srv.req("POST", "/v1/datasets?dtype=int64&shape=4", b"".join(
        x.to_bytes(8, "little", signed=True) for x in (5, -2, 7, 1)), {"Content-Type": "application/octet-stream"})
    CHECK.eq(ds.status, 201, "a dataset uploaded from the host with the token")
    r = srv.req("POST", "/v1/jobs", {"op": "sum", "dtype": "float32", "data": [1.5, 2.5, 3]}, {"Prefer": "wait=10"})
    CHECK.eq((r.status, (r.json().get("result") or {}).get("value")), (200, 7.0),
             "a job POSTed from the host with curl and the token succeeds")
    anon = Via(int(srv.base.rsplit(":", 1)[1]), token=None).req("POST", "/v1/jobs", {"op": "sum", "data": [1]})
    CHECK.eq(anon.status, 401, "a request without a token gets 401")
    hc = podman("healthcheck", "run", name, check=False)
    status = podman("inspect", "--format", "{{.State.Health.Status}}", name).stdout.strip()
    CHECK.eq((hc.returncode, status), (0, "healthy"), "the HEALTHCHECK reports healthy")
    return ds.json().get("id"), r.json().get("id")


def check_stop(name, srv):
    """Jobs queued behind a long one, then podman stop: exit 0 within 10 s, the queued ones kept."""
    blocker = L.blocker(srv, 3)
    CHECK.eq(blocker.status, 202, "a long job runs")
    queued = [srv.req("POST", "/v1/jobs", {"op": "max", "dtype": "int32", "data": [k, 40, -1]}).json()["id"]
              for k in range(5)]
    states = [srv.get_json("/v1/jobs/" + j).get("status") for j in queued]
    CHECK.eq(states, ["queued"] * 5, "five jobs queued behind it")
    t0 = time.monotonic()
    podman("stop", "-t", "10", name, timeout=60)
    took = time.monotonic() - t0
    code = podman("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip()
    CHECK.ok(took <= 10 and code == "0", "podman stop ends it with exit 0 within 10 s (%.1f s, exit %s)" % (took, code))
    return queued


def check_second(volume, tokens, port, ds, done, queued):
    name = "gpured-test-b-%d" % os.getpid()
    srv = up(name, port, volume, tokens)
    try:
        CHECK.eq((srv.get_json("/v1/jobs/" + done).get("result") or {}).get("value"), 7.0,
                 "a second container on the same /data reads the first one's job")
        CHECK.eq(srv.get_json("/v1/datasets/" + ds).get("shape"), [4], "and its dataset")
        ends = [srv.get_json("/v1/jobs/%s?wait=30" % j) for j in queued]
        CHECK.eq([(j.get("status"), (j.get("result") or {}).get("value")) for j in ends], [("succeeded", 40)] * 5,
                 "the jobs queued when the first stopped run in the second")
    finally:
        podman("rm", "-f", name, check=False)


def check_compose():
    """docker-compose validates the file against its schema (a typo'd key fails), offline."""
    env = dict(os.environ, GPURED_PG_PASSWORD="not-used")
    for profile in ([], ["--profile", "replicas"]):
        r = subprocess.run(["docker-compose", "-f", os.path.join(SRC, "deploy", "compose.yaml")] + profile +
                           ["config", "-q"], capture_output=True, text=True, env=env, timeout=120)
        CHECK.eq((r.returncode, r.stderr.strip()[-500:]), (0, ""), "deploy/compose.yaml %s is valid"
                 % " ".join(profile))
    print("not run: the replicas profile (its postgres:15 image is on a registry this machine cannot reach, "
          "and its replicas reserve GPUs)", flush=True)


def main():
    why = usable()
    if why:
        raise L.Skip(why)
    check_compose()
    base()
    t0 = time.monotonic()
    podman("build", "--format", "docker", "--network", "host", "--build-arg", "BUILD_IMAGE=" + BASE,
           "--build-arg", "RUNTIME_IMAGE=" + BASE, "-t", IMAGE, SRC, timeout=1800)
    print("image built from the Dockerfile in %.0f s" % (time.monotonic() - t0), flush=True)
    volume = "gpured-test-data-%d" % os.getpid()
    secrets = tempfile.mkdtemp(prefix="gpured-secret-")
    tokens = os.path.join(secrets, "gpured-tokens")
    with open(tokens, "w") as f:
        f.write("alice %s\n" % TOKEN)
    os.chmod(secrets, 0o755)
    os.chmod(tokens, 0o644)  # the container's user (uid 10001) reads it
    name = "gpured-test-a-%d" % os.getpid()
    try:
        check_image()
        podman("volume", "create", volume)
        check_refuses(volume)
        port = L.free_port()
        srv = up(name, port, volume, tokens)
        ds, done = check_serving(name, srv)
        queued = check_stop(name, srv)
        podman("rm", "-f", name, check=False)
        check_second(volume, tokens, port, ds, done, queued)
    finally:
        podman("rm", "-f", name, check=False)
        podman("volume", "rm", "-f", volume, check=False)
        podman("rmi", "-f", IMAGE, check=False)
        podman("image", "prune", "-f", check=False)  # the build stage's layers; the base stays
        shutil.rmtree(secrets, ignore_errors=True)


L.run_suite(main)
