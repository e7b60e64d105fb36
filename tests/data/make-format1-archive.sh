#!/usr/bin/env bash
# How tests/data/format1-archive.tar.gz was made: an archive written by the release before
# format 2 (commit 593973a, whose timewarp-archiver writes format 1 only), of a small tree
# under /timewarp-fixture/src. tests/archiver/format1_compat_test.cpp reads it with today's
# code. Usage (as root): make-format1-archive.sh PATH/TO/OLD/timewarp-archiver OUT.tar.gz
set -euo pipefail
archiver=$1
out=$2
rm -rf /timewarp-fixture
mkdir -p /timewarp-fixture/src/dir/sub
cd /timewarp-fixture/src
printf 'first version\n' >notes.txt
touch -d '2026-01-02 03:04:05.123456789' notes.txt
printf 'tab\there' >$'odd\tname %\xff.txt'
ln -s notes.txt link
printf 'deep\n' >dir/sub/deep.txt
printf 'gone soon\n' >dir/gone.txt
root=/timewarp-fixture/archive
src=/timewarp-fixture/src
req() { printf '%s\n' "$@" | "$archiver" --backup-root=$root --log-level=error; }
req "1	UPDATE	$src" "2	UPDATE	$src/notes.txt" "3	UPDATE	$src/odd%09name %25%FF.txt" \
    "4	UPDATE	$src/link" "5	UPDATE	$src/dir" "6	UPDATE	$src/dir/sub" \
    "7	UPDATE	$src/dir/sub/deep.txt" "8	UPDATE	$src/dir/gone.txt"
sleep 1.1
printf 'second version, longer\n' >>notes.txt
rm dir/gone.txt
req "9	UPDATE	$src/notes.txt" "10	DELETE	$src/dir/gone.txt" "11	UPDATE	$src/dir"
cd /timewarp-fixture
tar --owner=0 --group=0 --numeric-owner -czf "$out" archive
