#!/bin/bash
# usage: packaging/version.sh SOURCE_DATE_EPOCH
# The Debian version of HEAD: X.Y.Z from a vX.Y.Z tag on HEAD
# (X.Y.Z+N.gHASH N commits after it), else 0~gitYYYYMMDDhhmmss.HASH, which
# sorts below any tagged release and rises with every commit.
set -euo pipefail
if d=$(git describe --tags --match 'v[0-9]*' 2>/dev/null); then
    d=${d#v}
    echo "${d/-/+}" | tr - .
elif h=$(git rev-parse --short=7 HEAD 2>/dev/null); then
    echo "0~git$(date -u -d "@$1" +%Y%m%d%H%M%S).$h"
else
    echo "0~dev"
fi
