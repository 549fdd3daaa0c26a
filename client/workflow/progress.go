package workflow

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// Progress shows a bulk command's nodes as they move: live bars on a
// terminal, one plain line per change otherwise.
type Progress interface {
	// Task registers one node; it shows once it leaves the queue.
	Task(label string) Task
	// Close waits for the display to settle; call after every Task is Done.
	Close()
}

// Task is one node's line.
type Task interface {
	State(s string)           // the node's current state or step
	Done(ok bool, msg string) // final state, or the error
}

// NewProgress picks live bars when tty is true, plain lines otherwise.
func NewProgress(w io.Writer, tty bool, title string, total int) Progress {
	if tty {
		return newBars(w, title, total)
	}
	return &plain{w: w}
}

// plain writes "label: state" whenever a node's state changes.
type plain struct {
	mu sync.Mutex
	w  io.Writer
}

type plainTask struct {
	p     *plain
	label string
	last  string
}

func (p *plain) Task(label string) Task { return &plainTask{p: p, label: label} }
func (p *plain) Close()                 {}

func (t *plainTask) State(s string) {
	if s == t.last {
		return
	}
	t.last = s
	t.p.mu.Lock()
	fmt.Fprintf(t.p.w, "%s: %s\n", t.label, s)
	t.p.mu.Unlock()
}

func (t *plainTask) Done(ok bool, msg string) {
	word := "done"
	if !ok {
		word = "FAILED"
	}
	t.p.mu.Lock()
	fmt.Fprintf(t.p.w, "%s: %s: %s\n", t.label, word, msg)
	t.p.mu.Unlock()
}

// bars is the terminal display (github.com/vbauerster/mpb): a bar for the
// batch, and one line per node in flight showing its state; finished nodes
// leave a line above the bars.
type bars struct {
	p     *mpb.Progress
	total *mpb.Bar
	width int
}

func newBars(w io.Writer, title string, total int) *bars {
	p := mpb.New(mpb.WithOutput(w), mpb.WithWidth(40), mpb.WithRefreshRate(120*time.Millisecond))
	b := &bars{p: p, width: 24}
	b.total = p.AddBar(int64(total),
		mpb.BarPriority(-1), // always on top
		mpb.PrependDecorators(
			decor.Name(title, decor.WC{C: decor.DindentRight | decor.DextraSpace}),
			decor.CountersNoUnit("%d/%d nodes", decor.WCSyncWidth),
		),
		mpb.AppendDecorators(decor.Percentage(decor.WC{W: 5}), decor.Name(" "), decor.Elapsed(decor.ET_STYLE_GO)),
	)
	return b
}

type barTask struct {
	b     *bars
	label string
	once  sync.Once
	bar   *mpb.Bar
	state atomic.Value
	start time.Time
}

func (b *bars) Task(label string) Task { return &barTask{b: b, label: label} }

func (b *bars) Close() {
	if !b.total.Completed() {
		b.total.Abort(false)
	}
	b.p.Wait()
}

func (t *barTask) State(s string) {
	t.state.Store(s)
	t.once.Do(func() {
		t.start = time.Now()
		t.bar = t.b.p.New(1, mpb.NopStyle(),
			mpb.BarRemoveOnComplete(),
			mpb.PrependDecorators(
				decor.Name("  "+t.label, decor.WC{W: t.b.width, C: decor.DindentRight | decor.DextraSpace}),
				decor.Any(func(decor.Statistics) string { v, _ := t.state.Load().(string); return v }),
			),
		)
	})
}

func (t *barTask) Done(ok bool, msg string) {
	t.State(msg)
	mark := "ok  "
	if !ok {
		mark = "FAIL"
	}
	fmt.Fprintf(t.b.p, "%s %-*s %s (%s)\n", mark, t.b.width, t.label, msg, time.Since(t.start).Round(10*time.Millisecond))
	t.bar.SetCurrent(1)
	t.b.total.Increment()
}
