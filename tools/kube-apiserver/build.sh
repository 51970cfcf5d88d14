#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# build.sh: builds k8s.io/kubernetes' cmd/kube-apiserver from the Go module
# proxy (no git checkout) into .cache/kube-apiserver/<version>/kube-apiserver,
# for internal/kubetest. A second run with the binary present does nothing.
#
# k8s.io/kubernetes' go.mod replaces every staging module (k8s.io/api,
# k8s.io/apiserver ...) with ./staging/src/k8s.io/<name>, a directory the
# published module zip does not contain. So the build happens in a scratch
# module (.cache/kube-apiserver/src/<version>) that requires
# k8s.io/kubernetes <version> and replaces each of those modules with its
# published release instead: Kubernetes v1.N.M publishes the staging modules
# as v0.N.M. A staging module the proxy does not serve at that version (one
# the server does not import) is replaced by an empty local stub module so the
# module graph resolves; if a package of it is imported, the build fails and
# names it.
#
# Environment: KUBE_VERSION (default below), GO (default go), CACHE_DIR
# (default <repo>/.cache/kube-apiserver), NICE (default 10: go build runs
# under nice -n $NICE). The first build takes ~10 minutes of 2 idle cores;
# tools/heartbeat.sh prints progress while go build is silent.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
GO=${GO:-go}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
CACHE_DIR=${CACHE_DIR:-$root/.cache/kube-apiserver}
out=$CACHE_DIR/$KUBE_VERSION/kube-apiserver

if [ -x "$out" ]; then
	echo "kube-apiserver $KUBE_VERSION: cached at $out"
	exit 0
fi

case $KUBE_VERSION in
v1.[0-9]*.[0-9]*) ;;
*)
	echo "build.sh: KUBE_VERSION=$KUBE_VERSION is not of the form v1.N.M" >&2
	exit 2
	;;
esac
# v1.N.M -> v0.N.M, the staging modules' published version.
staging_version=v0.${KUBE_VERSION#v1.}

export CGO_ENABLED=0 GOFLAGS=-mod=mod GOWORK=off

echo "kube-apiserver $KUBE_VERSION: downloading k8s.io/kubernetes"
gomod=$("$GO" mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
if [ -z "$gomod" ] || [ ! -f "$gomod" ]; then
	echo "build.sh: no go.mod for k8s.io/kubernetes@$KUBE_VERSION" >&2
	exit 1
fi

src=$CACHE_DIR/src/$KUBE_VERSION
rm -rf "$src"
mkdir -p "$src/stub"

# The staging modules: "k8s.io/<name> => ./staging/..." lines of go.mod's
# replace block.
staging=$(sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\)[[:space:]]*=>[[:space:]]*\./staging/.*#\1#p' "$gomod")
if [ -z "$staging" ]; then
	echo "build.sh: $gomod has no staging replace lines" >&2
	exit 1
fi
goline=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$gomod" | head -n 1)
godebug=$(sed -n 's/^godebug \(.*\)$/\1/p' "$gomod" | head -n 1)

{
	echo "module kube-apiserver-build"
	echo
	echo "go ${goline:-1.24}"
	[ -n "$godebug" ] && echo "godebug $godebug"
	echo
	echo "require k8s.io/kubernetes $KUBE_VERSION"
	echo
	echo "replace ("
} >"$src/go.mod"

n=0
stubs=""
for m in $staging; do
	n=$((n + 1))
	if "$GO" mod download -json "$m@$staging_version" >/dev/null 2>&1; then
		printf '\t%s => %s %s\n' "$m" "$m" "$staging_version" >>"$src/go.mod"
	else
		d=$src/stub/${m#k8s.io/}
		mkdir -p "$d"
		printf 'module %s\n\ngo 1.24\n' "$m" >"$d/go.mod"
		printf '\t%s => ./stub/%s\n' "$m" "${m#k8s.io/}" >>"$src/go.mod"
		stubs="$stubs $m"
	fi
done
echo ")" >>"$src/go.mod"
echo "kube-apiserver $KUBE_VERSION: $n staging modules -> $staging_version${stubs:+; not published, stubbed:$stubs}"

# What hack/lib/version.sh stamps into a release build: /version and
# kube-apiserver --version report the real version, not v0.0.0-master.
minor=${staging_version#v0.}
minor=${minor%%.*}
vpkg=k8s.io/component-base/version
ldflags="-s -w -X $vpkg.gitVersion=$KUBE_VERSION -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean"

mkdir -p "$(dirname "$out")"
start=$SECONDS
echo "kube-apiserver $KUBE_VERSION: go build (about 10 minutes the first time)"
(
	cd "$src"
	"$here/../heartbeat.sh" nice -n "${NICE:-10}" "$GO" build -trimpath -ldflags="$ldflags" -o "$out.tmp" k8s.io/kubernetes/cmd/kube-apiserver
)
mv "$out.tmp" "$out"
echo "kube-apiserver $KUBE_VERSION: built $out ($(du -h "$out" | cut -f1)) in $((SECONDS - start)) s"
