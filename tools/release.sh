#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# release.sh: writes the release into $DIST (make release sets every variable
# below from the Makefile):
#   kernel_exporter-$VERSION.linux-$ARCH.tar.gz  a directory of the same name
#       with the static binary, README.md, the licences (LICENSE, LICENSES/,
#       THIRD_PARTY_LICENSES: the Go modules linked in), deploy/ (the systemd
#       unit for /usr/local/bin, the sysusers file, prometheus/ rules and
#       grafana/ dashboard) and the kit for writing programs: include/ (the
#       headers, a vmlinux.h per architecture, libbpf's BPF-side headers in
#       include/bpf/ with their COPYING), examples/ and docs/ (every page
#       and image README.md links to, so that its links and theirs resolve
#       inside the tarball);
#   kernel_exporter_$DEB_VERSION_$ARCH.deb       built with nfpm
#       (deploy/nfpm.yaml, run as go run ...nfpm@$NFPM_VERSION): the same,
#       with README.md, docs/, examples/ and the licences in
#       /usr/share/doc/kernel_exporter (copyright in Debian's
#       machine-readable format, and LICENSE and LICENSES/, which README.md
#       links to; its deploy/ is a link to /usr/share/kernel_exporter) and
#       the kit in /usr/share/kernel_exporter, where kernel_exporter new
#       finds it;
#   sha256sums.txt                                over all of the above.
# Tarballs are reproducible: names sorted, owner root, mtime and gzip header
# from SOURCE_DATE_EPOCH.
set -euo pipefail
: "${GO:?}" "${VERSION:?}" "${DEB_VERSION:?}" "${LDFLAGS:?}" "${DIST:?}" "${ARCHES:?}" \
	"${NFPM_VERSION:?}" "${SOURCE_DATE_EPOCH:?}"

root=$(pwd)

# kit DEPLOY TOP DOC: the rules and dashboard into DEPLOY/{prometheus,grafana},
# the headers into TOP/include, the examples and the docs into
# DOC/{examples,docs} (tracked kinds of file only: no build output).
kit() {
	mkdir -p "$1/prometheus" "$1/grafana" "$3/examples" "$3/docs"
	cp deploy/prometheus/*.yml deploy/prometheus/README.md "$1/prometheus/"
	cp deploy/grafana/*.json deploy/grafana/README.md "$1/grafana/"
	(find include -name '*.h' -o -name COPYING | while read -r h; do
		mkdir -p "$2/$(dirname "$h")" && cp "$h" "$2/$h"
	done)
	cp examples/README.md examples/*.bpf.c examples/*.yaml "$3/examples/"
	cp docs/*.md docs/*.png "$3/docs/"
}
mkdir -p "$DIST"
dist=$(cd "$DIST" && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
rm -f "$dist"/kernel_exporter-*.tar.gz "$dist"/kernel_exporter_*.deb "$dist/sha256sums.txt"

for arch in $ARCHES; do
	name=kernel_exporter-$VERSION.linux-$arch
	dir=$stage/$name
	mkdir -p "$dir/deploy"
	echo "release: go build linux/$arch"
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch "$GO" build -trimpath -ldflags "$LDFLAGS" \
		-o "$dir/kernel_exporter" ./cmd/kernel_exporter
	cp README.md LICENSE "$dir/"
	cp -r LICENSES "$dir/"
	GOOS=linux GOARCH=$arch GO=$GO tools/third-party-licenses.sh "$dir/THIRD_PARTY_LICENSES"
	cp deploy/kernel_exporter.service deploy/kernel_exporter.sysusers "$dir/deploy/"
	kit "$dir/deploy" "$dir" "$dir"
	echo "release: $name.tar.gz"
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
		-C "$stage" -cf - "$name" | gzip -n -9 >"$dist/$name.tar.gz"

	# The .deb: the binary at /usr/bin, its flags from /etc/default.
	deb=$stage/deb-$arch
	mkdir -p "$deb"
	cp "$dir/kernel_exporter" README.md deploy/nfpm.yaml deploy/kernel_exporter.sysusers \
		deploy/deb/kernel_exporter.default deploy/deb/postinst.sh deploy/deb/prerm.sh \
		deploy/deb/postrm.sh deploy/deb/copyright "$dir/THIRD_PARTY_LICENSES" "$deb/"
	kit "$deb/share" "$deb/share" "$deb/doc"
	cp LICENSE "$deb/doc/" && cp -r LICENSES "$deb/doc/"
	# nfpm takes a tree's directory times from the files: make them fixed.
	find "$deb" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
	sed -e 's|^ExecStart=.*|EnvironmentFile=-/etc/default/kernel_exporter\nExecStart=/usr/bin/kernel_exporter $ARGS|' \
		deploy/kernel_exporter.service >"$deb/kernel_exporter.service"
	grep -q '^ExecStart=/usr/bin/kernel_exporter \$ARGS$' "$deb/kernel_exporter.service" || {
		echo "release: deploy/kernel_exporter.service has no ExecStart line to rewrite" >&2
		exit 1
	}
	echo "release: kernel_exporter_${DEB_VERSION}_$arch.deb (nfpm $NFPM_VERSION)"
	(cd "$deb" && NFPM_ARCH=$arch DEB_VERSION=$DEB_VERSION \
		"$GO" run "github.com/goreleaser/nfpm/v2/cmd/nfpm@$NFPM_VERSION" \
		package --config nfpm.yaml --packager deb --target "$dist/")
done

(cd "$dist" && sha256sum kernel_exporter-*.tar.gz kernel_exporter_*.deb >sha256sums.txt)
echo "release: $dist"
ls -l "$dist"
