// SPDX-License-Identifier: Apache-2.0

package include

import "embed"

// Arch is the __TARGET_ARCH_ name of this machine's architecture.
const Arch = "x86"

//go:embed x86/vmlinux.h
var arch embed.FS
