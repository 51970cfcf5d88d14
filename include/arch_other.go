// SPDX-License-Identifier: Apache-2.0

//go:build !amd64 && !arm64

package include

import "embed"

// Arch is "" where no vmlinux.h is embedded (an architecture other than
// amd64 and arm64): programs need a vmlinux.h generated for it.
const Arch = ""

var arch embed.FS
