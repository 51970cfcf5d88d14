// SPDX-License-Identifier: Apache-2.0

package include

import "embed"

// Arch is the __TARGET_ARCH_ name of this machine's architecture.
const Arch = "arm64"

//go:embed arm64/vmlinux.h
var arch embed.FS
