// SPDX-License-Identifier: Apache-2.0

package exposition

import (
	"io"
	"net/http"
	"sync"
)

// MaxSharedBytes bounds what a scrape keeps of its encoded output for
// scrapes that may still join it. Concurrent scrapes of the same format
// and compression share one read and one encoding: the first (the leader)
// encodes and writes to its client, and keeps a copy of every chunk so
// that scrapes arriving meanwhile (followers) are sent the same bytes from
// the start. While no follower has joined, a leader that has written more
// than MaxSharedBytes drops its copy and lets no one join any more: a
// single scraper of a big map is streamed without the response ever
// being held whole. A follower that joined earlier keeps the copy growing
// until the leader ends (it is freed when the last of them is done).
const MaxSharedBytes = 8 << 20

// broadcast is one shared encoding.
type broadcast struct {
	mu        sync.Mutex
	cond      *sync.Cond
	chunks    [][]byte
	size      int
	followers int
	closed    bool // no more joins
	done      bool
	err       error
}

func newBroadcast() *broadcast {
	b := &broadcast{}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// join adds a follower, unless the broadcast no longer takes any.
func (b *broadcast) join() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.followers++
	return true
}

// follow writes the leader's chunks to w as they come, until the leader is
// done. It returns the leader's error, or w's.
func (b *broadcast) follow(w http.ResponseWriter) error {
	defer func() {
		b.mu.Lock()
		b.followers--
		if b.done && b.followers == 0 {
			b.chunks = nil // the last reader is done: free the copy now
		}
		b.cond.Broadcast()
		b.mu.Unlock()
	}()
	fl, _ := w.(http.Flusher)
	for i := 0; ; i++ {
		b.mu.Lock()
		for i >= len(b.chunks) && !b.done {
			b.cond.Wait()
		}
		if i >= len(b.chunks) {
			err := b.err
			b.mu.Unlock()
			return err
		}
		c := b.chunks[i]
		b.mu.Unlock()
		if _, err := w.Write(c); err != nil {
			return err
		}
		if fl != nil && i%16 == 15 {
			fl.Flush()
		}
	}
}

// finish ends the leader's encoding with its error.
func (b *broadcast) finish(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done, b.closed, b.err = true, true, err
	if b.followers == 0 {
		b.chunks = nil // nobody reads the copy: free it now
	}
	b.cond.Broadcast()
}

// tee returns the leader's writer: it writes to w and copies what it
// writes for followers. close is called once, when the broadcast stops
// taking followers.
func (b *broadcast) tee(w io.Writer, close func()) *teeWriter {
	return &teeWriter{b: b, w: w, close: close}
}

// teeWriter is the leader's side of a broadcast. A write error of the
// leader's own client is kept in err, and the encoding goes on for the
// followers (if any); the leader's client gets nothing more.
type teeWriter struct {
	b     *broadcast
	w     io.Writer
	close func()
	err   error
}

func (t *teeWriter) Write(p []byte) (int, error) {
	b := t.b
	b.mu.Lock()
	stop := !b.closed && b.followers == 0 && b.size+len(p) > MaxSharedBytes
	if stop {
		b.closed = true
		b.chunks, b.size = nil, 0
	}
	if !b.closed || b.followers > 0 {
		b.chunks = append(b.chunks, append([]byte(nil), p...))
		b.size += len(p)
		b.cond.Broadcast()
	}
	alone := b.closed && b.followers == 0
	b.mu.Unlock()
	if stop && t.close != nil {
		// After b.mu: the handler takes its lock, then b.mu.
		t.close()
		t.close = nil
	}
	if t.err == nil {
		if _, err := t.w.Write(p); err != nil {
			t.err = err
		}
	}
	if t.err != nil && alone {
		return 0, t.err // nobody else reads: stop encoding
	}
	return len(p), nil
}
