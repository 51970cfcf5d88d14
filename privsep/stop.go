// SPDX-License-Identifier: Apache-2.0

package privsep

import (
	"log/slog"
	"os"
	"os/signal"
	"time"

	"golang.org/x/sys/unix"
)

// StopGrace is how long a helper outlives a SIGINT or SIGTERM while its
// socket stays open.
//
// A stop signal usually reaches the whole exporter at once: systemd's
// default KillMode=control-group sends SIGTERM to every process of the
// service, and Ctrl-C in a terminal sends SIGINT to the foreground
// process group. The exporter then detaches its programs and closes the
// helper's socket, and the helpers exit at end of file, as on any stop.
// Exiting at the signal instead would look to the exporter, which still
// runs, like a crash of the helper. A helper signalled on its own (kill
// PID) exits once StopGrace has passed with the socket still open, and
// logs why.
const StopGrace = 30 * time.Second

// catchStop catches SIGINT and SIGTERM from now on, for afterStop. Main
// calls it first, so that no stop signal ends a helper before.
func catchStop() <-chan os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, unix.SIGINT, unix.SIGTERM)
	return ch
}

// afterStop waits in the background for the first signal on ch, then
// keeps the process running for grace (an end of file on its socket
// exits it sooner, as at any stop) and calls exit with the signal.
func afterStop(log *slog.Logger, ch <-chan os.Signal, grace time.Duration, exit func(os.Signal)) {
	go func() {
		sig := <-ch
		log.Debug("privileged helper: stop signal, exiting when the exporter closes the socket", "pid", os.Getpid(), "signal", sig.String(), "grace", grace)
		time.Sleep(grace)
		exit(sig)
	}()
}
