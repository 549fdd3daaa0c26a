#!/bin/bash
# usage: packaging/manpage.sh CASTIRON_BINARY VERSION DATE > castiron.1
# The man page is castiron's own help text (castiron help, castiron serve -h),
# so it cannot drift from the binary it ships with.
set -euo pipefail
bin=$1 version=$2 date=$3

# roff: a backslash is \e; a line starting with . or ' would be a request.
esc() { sed -e 's/\\/\\e/g' -e "s/^[.']/\\\\\\&&/"; }

cat <<HEAD
.TH CASTIRON 1 "$date" "castiron $version" "castiron"
.SH NAME
castiron \- bare-metal provisioning appliance speaking OpenStack Ironic's API
.SH SYNOPSIS
.B castiron
[\fIcommand\fR] [\fIflags\fR]
.SH DESCRIPTION
.nf
HEAD
"$bin" help 2>&1 | esc
cat <<'MID'
.fi
.SH SERVE FLAGS
.nf
MID
"$bin" serve -h 2>&1 | esc
cat <<'TAIL'
.fi
.SH FILES
.TP
.I /etc/castiron/castiron.yaml
the configuration of castiron.service (castiron config prints every key)
.TP
.I /var/lib/castiron
the data dir: castiron.db (SQLite), ramdisk/, images/
.SH SEE ALSO
.BR systemctl (1),
.BR journalctl (1)
TAIL
