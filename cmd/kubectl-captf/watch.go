package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// watchStatus is status --watch: it prints the report, then watches the CAPTF objects of the
// namespace (of every namespace with -A) and prints the report again after each change that
// changes what it prints, until ctx ends (an interrupt); it then ends with the exit code of the
// last report. Each text report after the first starts with a line of its time; JSON reports
// follow each other, YAML reports are separated by "---". A watch the API server closes is
// opened again; one that fails ends the command with its error.
func (o *options) watchStatus(ctx context.Context, c client.WithWatch, q statusQuery) error {
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	if q.AllNamespaces {
		ns = ""
	}
	// Reports are compared as rendered at the watch's start, so an event that changes nothing
	// but the ages (any status write a second later) prints nothing; the one printed is
	// rendered now.
	start := o.clock()
	var last []byte
	code := exitOK
	show := func() error {
		r, err := o.gatherReport(ctx, c, q)
		if err != nil {
			return err
		}
		code = r.ExitCode
		key, err := o.render(r, start)
		if err != nil {
			return err
		}
		if last != nil && bytes.Equal(key, last) {
			return nil
		}
		now := o.clock()
		text, err := o.render(r, now)
		if err != nil {
			return err
		}
		if last != nil {
			if err := o.reportSeparator(now); err != nil {
				return err
			}
		}
		last = key
		_, err = o.streams.Out.Write(text)
		return err
	}
	for {
		events, stop, err := watchKinds(ctx, c, ns)
		if err == nil {
			if err = show(); err == nil {
				err = forEachChange(ctx, events, show)
			}
			stop()
		}
		switch {
		case ctx.Err() != nil:
			// Interrupted, perhaps in the middle of a read: the last report printed stands.
			if code != exitOK {
				return &exitError{code: code}
			}
			return nil
		case err != nil:
			return err
		}
		// The API server closed a watch (its timeout): open them again and show what changed
		// in between.
	}
}

// render is r as printReport prints it at now.
func (o *options) render(r Report, now time.Time) ([]byte, error) {
	var b bytes.Buffer
	sub := *o
	sub.streams.Out = &b
	if err := sub.printReport(r, now); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// reportSeparator starts a report after the first: the time for text, "---" for YAML, nothing
// for JSON (a stream of documents).
func (o *options) reportSeparator(now time.Time) error {
	var err error
	switch o.output {
	case "json":
	case "yaml":
		_, err = fmt.Fprintln(o.streams.Out, "---")
	default:
		_, err = fmt.Fprintf(o.streams.Out, "\n# %s\n", now.Format(time.RFC3339))
	}
	return err
}

// watchKinds watches the three kinds in ns ("" for every namespace) and merges their events
// into one channel, which closes when any watch ends; stop ends them all.
func watchKinds(ctx context.Context, c client.WithWatch, ns string) (<-chan watch.Event, func(), error) {
	var watches []watch.Interface
	stop := func() {
		for _, w := range watches {
			w.Stop()
		}
	}
	for _, k := range kinds {
		o, err := c.Scheme().New(infrav1.GroupVersion.WithKind(k.Kind + "List"))
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("watch %s: %w", k.Kind, err)
		}
		l, ok := o.(client.ObjectList)
		if !ok {
			stop()
			return nil, nil, fmt.Errorf("watch %s: %T is not a list", k.Kind, o)
		}
		w, err := c.Watch(ctx, l, client.InNamespace(ns))
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("watch %s: %w", k.Kind, err)
		}
		watches = append(watches, w)
	}
	out := make(chan watch.Event)
	done := make(chan struct{})
	for _, w := range watches {
		go func() {
			for e := range w.ResultChan() {
				select {
				case out <- e:
				case <-done:
					return
				}
			}
			select {
			case out <- watch.Event{Type: watch.Error}:
			case <-done:
			}
		}()
	}
	return out, func() { close(done); stop() }, nil
}

// forEachChange calls show after each batch of events (every event already waiting is taken
// with the first), until ctx ends (nil) or a watch closes (nil: the caller opens them again) or
// show fails (its error).
func forEachChange(ctx context.Context, events <-chan watch.Event, show func() error) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-events:
			closed := e.Type == watch.Error
			for more := true; more && !closed; {
				select {
				case e := <-events:
					closed = e.Type == watch.Error
				default:
					more = false
				}
			}
			if closed {
				return nil
			}
			if err := show(); err != nil {
				return err
			}
		}
	}
}
