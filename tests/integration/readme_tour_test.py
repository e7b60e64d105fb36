#!/usr/bin/env python3
"""The README's tour, as a new user takes it: `scripts/run` in a fresh project folder, then
every command the tour shows, from that folder, without --database or --backup-root. Each
command's --json output is checked against the schema this test keeps beside it
(readme_tour_schemas/<command>.json).

Usage: readme_tour_test.py REPO_ROOT BUILD_DIR
"""

import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time

import jsonschema

REPO = pathlib.Path(sys.argv[1])
BUILD = pathlib.Path(sys.argv[2])
TIMEWARP = str(BUILD / "bin" / "timewarp")
SCHEMAS = pathlib.Path(__file__).with_name("readme_tour_schemas")


def fail(message):
    print("FAIL: " + message, file=sys.stderr)
    sys.exit(1)


def tw(project, *args, check=True):
    """Runs `timewarp ARGS` from the project folder with nothing but its own settings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PG", "TIMEWARP_", "BACKUP_ROOT", "SOURCE_DIRS"))}
    done = subprocess.run([TIMEWARP, *args], cwd=project, env=env, capture_output=True,
                          timeout=120)
    if check and done.returncode != 0:
        fail(f"timewarp {' '.join(args)} exited {done.returncode}: "
             f"{done.stderr.decode(errors='replace')}")
    return done


def tw_json(project, schema, *args):
    """`timewarp ARGS --json`, parsed and checked against readme_tour_schemas/SCHEMA.json."""
    done = tw(project, *args, "--json")
    try:
        document = json.loads(done.stdout)
    except json.JSONDecodeError as e:
        fail(f"timewarp {' '.join(args)} --json is not JSON ({e}): {done.stdout[:300]!r}")
    dump = os.environ.get("TW_TOUR_DUMP")  # writing the schemas: keep each document there
    if dump:
        with open(pathlib.Path(dump) / f"{schema}.json", "w") as f:
            json.dump(document, f, indent=2)
        return document
    with open(SCHEMAS / f"{schema}.json") as f:
        jsonschema.validate(document, json.load(f))
    return document


def wait_for(what, condition, seconds=120):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    fail(f"gave up waiting for {what}")


def drained(project):
    status = tw(project, "status", "--json", check=False)
    if status.returncode != 0:
        return False
    backlog = json.loads(status.stdout)["backlog"]
    return backlog["total"] == 0


def main():
    with tempfile.TemporaryDirectory(prefix="timewarp-tour.") as tmp:
        tmp = pathlib.Path(tmp)
        os.chmod(tmp, 0o711)  # the private PostgreSQL may run as another user
        project, notes = tmp / "project", tmp / "notes"
        notes.mkdir()
        (notes / "todo.md").write_text("first draft\n")
        (notes / "ideas.txt").write_text("a\nb\n")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PG", "TIMEWARP_DATABASE", "BACKUP_ROOT", "SOURCE_DIRS"))}
        env["TIMEWARP_BUILD_DIR"] = str(BUILD)
        log = open(tmp / "run.log", "wb")
        run = subprocess.Popen([str(REPO / "scripts" / "run"), "--project", str(project),
                                "--no-build", "--source", str(notes)],
                               env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            tour(project, notes, run)
        except BaseException:
            log.flush()
            sys.stderr.write((tmp / "run.log").read_text(errors="replace")[-4000:])
            raise
        finally:
            if run.poll() is None:
                run.send_signal(signal.SIGTERM)
                run.wait(timeout=90)
            stop = f"source {REPO}/scripts/lib/pg.sh && tw_pg_stop {project}/.data/pg"
            subprocess.run(["bash", "-c", stop], capture_output=True)
        if run.returncode != 0:
            fail(f"the monitor exited {run.returncode} on SIGTERM")
    print("PASS")


def tour(project, notes, run):
    settings = project / ".timewarp.toml"
    wait_for("scripts/run to write its settings", settings.exists)
    if settings.stat().st_mode & 0o077:
        fail(".timewarp.toml may be read by others (it may hold a password)")
    config = tw_json(project, "config", "config")
    if config["config_file"] != str(settings):
        fail(f"timewarp config read {config['config_file']}, not {settings}")
    if config["keys"]["backup_root"]["from"] != f"file {settings}":
        fail(f"backup_root came from {config['keys']['backup_root']['from']}")
    wait_for("the monitor to start", lambda: run.poll() is not None or drained(project))
    if run.poll() is not None:
        fail(f"scripts/run exited {run.returncode}")
    todo = str(notes / "todo.md")
    wait_for("the first version of todo.md",
             lambda: tw(project, "versions", todo, check=False).returncode == 0)
    tw_json(project, "status", "status")
    tw_json(project, "versions", "versions", todo)
    # An instant between the two versions, to the second as people type it.
    time.sleep(1.1)
    instant = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time()))
    time.sleep(1.1)
    with open(todo, "a") as f:
        f.write("second draft\n")
    wait_for("the second version of todo.md",
             lambda: len(tw_json(project, "versions", "versions", todo)["paths"][0]["versions"]) >= 2)
    restored = project / "todo-v1.md"
    tw(project, "restore", todo, "--version", "1", "--to", str(restored))
    if restored.read_text() != "first draft\n":
        fail(f"restore --version 1 gave {restored.read_text()!r}")
    diff = tw_json(project, "diff", "diff", instant, str(notes))
    kinds = {c["path"]: c["kind"] for c in diff["changes"]}
    if kinds.get(todo) != "content":
        fail(f"diff since {instant} does not say {todo} changed: {diff}")
    tw_json(project, "verify", "verify")
    wait_for("the queue to drain", lambda: drained(project))
    check = tw_json(project, "check", "check", str(notes))
    if not check["current"]:
        fail(f"check after the queue drained: {check}")
    tw_json(project, "history", "history", todo)
    tw_json(project, "failed", "failed")
    tw_json(project, "forget", "forget", "--dry-run")
    browse(project, notes)


def browse(project, notes):
    """`timewarp mount`, as the tour shows it: the latest state, a file's versions side by
    side, then fusermount3 -u."""
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("mount part skipped: needs root and /dev/fuse", file=sys.stderr)
        return
    mountpoint = project / "mnt"
    mountpoint.mkdir()
    mount = subprocess.Popen([TIMEWARP, "mount", str(mountpoint)], cwd=project,
                             stderr=subprocess.PIPE)
    try:
        latest = pathlib.Path(str(mountpoint) + "/latest" + str(notes))
        wait_for("the mount", lambda: mount.poll() is not None or latest.is_dir(), 30)
        if mount.poll() is not None:
            fail(f"timewarp mount exited {mount.returncode}: {mount.stderr.read()!r}")
        if (latest / "todo.md").read_text() != (notes / "todo.md").read_text():
            fail("latest/.../todo.md differs from the file on disk")
        versions = sorted(pathlib.Path(str(mountpoint) + "/versions" + str(notes / "todo.md")).iterdir())
        if len(versions) < 2 or versions[0].read_text() != "first draft\n":
            fail(f"versions/.../todo.md holds {[v.name for v in versions]}")
    finally:
        subprocess.run(["fusermount3", "-u", str(mountpoint)], capture_output=True)
        try:
            mount.wait(timeout=30)
        except subprocess.TimeoutExpired:
            mount.kill()
            fail("timewarp mount did not exit after fusermount3 -u")
    if mount.returncode != 0:
        fail(f"timewarp mount exited {mount.returncode} after fusermount3 -u")


if __name__ == "__main__":
    main()
