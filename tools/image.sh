#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# image.sh: writes kernel_exporter's container image as the OCI archive
# $DIST/kernel_exporter-$VERSION.oci.tar (make image sets every variable
# below from the Makefile): for each of $ARCHES, the static binary built as
# make release builds it (CGO_ENABLED=0, -trimpath, $LDFLAGS), then
# tools/image (go-containerregistry) puts each, with the licences (LICENSE,
# LICENSES/, THIRD_PARTY_LICENSES), in an image FROM scratch and
# all in one image index, with every timestamp at $SOURCE_DATE_EPOCH. No
# base image and no registry: nothing is pulled.
set -euo pipefail
: "${GO:?}" "${VERSION:?}" "${REVISION:?}" "${LDFLAGS:?}" "${DIST:?}" "${ARCHES:?}" "${SOURCE_DATE_EPOCH:?}"

mkdir -p "$DIST"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
args=()
for arch in $ARCHES; do
	echo "image: go build linux/$arch" >&2
	mkdir -p "$stage/$arch"
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch "$GO" build -trimpath -ldflags "$LDFLAGS" \
		-o "$stage/$arch/kernel_exporter" ./cmd/kernel_exporter
	args+=(-binary "$arch=$stage/$arch/kernel_exporter")
	# The licences, under /usr/share/doc/kernel_exporter/ in the image.
	mkdir -p "$stage/$arch/doc"
	cp -r LICENSE LICENSES "$stage/$arch/doc/"
	GOOS=linux GOARCH=$arch GO=$GO tools/third-party-licenses.sh "$stage/$arch/doc/THIRD_PARTY_LICENSES"
	args+=(-doc "$arch=$stage/$arch/doc")
done
out=$DIST/kernel_exporter-$VERSION.oci.tar
CGO_ENABLED=0 "$GO" build -o "$stage/image" ./tools/image
digest=$("$stage/image" -out "$out" -version "$VERSION" -revision "$REVISION" \
	-created "$SOURCE_DATE_EPOCH" "${args[@]}")
echo "image: $out ($ARCHES) index $digest" >&2
echo "image: podman load -i $out   (tag localhost/kernel_exporter:$VERSION)" >&2
