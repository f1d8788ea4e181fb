# pg_cluster.py: a throwaway PostgreSQL 15 cluster (Debian's postgresql package) for the tests:
# initdb in a temporary directory, pg_ctl on a free loopback port, trust auth for the user
# "gpured". PostgreSQL refuses to run as root, so as root the cluster runs as the package's
# "postgres" user. Used by e2e_lib (import) and by ctest's pg fixture (python3 pg_cluster.py
# start|stop DIR: start writes DIR/url).
import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile

USER = "gpured"


def _bin(name):
    """name from GPURED_PG_BIN (a folder: PostgreSQL unpacked elsewhere), the PATH, or Debian's place."""
    own = os.path.join(os.environ.get("GPURED_PG_BIN", ""), name)
    if os.environ.get("GPURED_PG_BIN") and os.access(own, os.X_OK):
        return own
    found = shutil.which(name) or sorted(glob.glob("/usr/lib/postgresql/*/bin/" + name))
    if not found:
        raise FileNotFoundError("%s not found: install Debian's postgresql package" % name)
    return found if isinstance(found, str) else found[-1]


def _as_owner(cmd):
    """cmd as the cluster's owner: ourselves, or postgres when we are root."""
    return ["runuser", "-u", "postgres", "--"] + cmd if os.geteuid() == 0 else cmd


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, root=None):
        self.root = root or tempfile.mkdtemp(prefix="gpured-pg-")
        self.data = os.path.join(self.root, "data")
        self.port = None

    @property
    def url(self):
        return "postgresql://%s@127.0.0.1:%d/postgres" % (USER, self.port)

    def db_url(self, name):
        return "postgresql://%s@127.0.0.1:%d/%s" % (USER, self.port, name)

    def start(self):
        os.makedirs(self.root, exist_ok=True)
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        if not os.path.isdir(self.data):
            subprocess.run(_as_owner([_bin("initdb"), "-D", self.data, "-U", USER, "-A", "trust", "-E", "UTF8",
                                      "--no-instructions"]), check=True, stdout=subprocess.DEVNULL)
        self.port = _free_port()
        self._serve()
        return self

    def _serve(self):
        opts = "-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=300" % (self.port, self.root)
        subprocess.run(_as_owner([_bin("pg_ctl"), "-D", self.data, "-l", os.path.join(self.root, "log"), "-o", opts,
                                  "-w", "-t", "60", "start"]), check=True, stdout=subprocess.DEVNULL)

    def stop(self, mode="fast"):
        subprocess.run(_as_owner([_bin("pg_ctl"), "-D", self.data, "-m", mode, "-w", "stop"]),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def restart(self):
        """Stop and start on the same port (clients reconnect to the same URL)."""
        self.stop()
        self._serve()

    def create_db(self, name):
        """A new, empty database; its URL."""
        subprocess.run([_bin("psql"), "-q", "-v", "ON_ERROR_STOP=1", self.url, "-c", 'CREATE DATABASE "%s"' % name],
                       check=True, stdout=subprocess.DEVNULL)
        return self.db_url(name)

    def remove(self):
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("start", "stop"):
        sys.exit("usage: pg_cluster.py start|stop DIR")
    c = Cluster(sys.argv[2])
    if sys.argv[1] == "start":
        if os.path.isdir(c.data):  # a cluster left by an interrupted run
            c.stop("immediate")
        c.start()
        with open(os.path.join(c.root, "url"), "w") as f:
            f.write(c.url + "\n")
        print(c.url)
    else:
        c.remove()


if __name__ == "__main__":
    main()
