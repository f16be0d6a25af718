package doccmd

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Pages are the pages whose every command has a fate, relative to the repository root.
var Pages = []string{"README.md", "docs/sandbox.md", "docs/flavors.md", "docs/cli.md", "docs/plans.md", "docs/state.md", "docs/drift.md", "docs/lifecycle.md"}

// Command is one command a page shows.
type Command struct {
	// Page is the page, relative to the repository root; Line the command's first line there.
	Page string
	Line int
	// Text is the command as a shell runs it: continuation lines joined by a space, the
	// trailing comment removed.
	Text string
	// Comment is the trailing comment ("" for none), without its "#".
	Comment string
	// Output is what the page shows after the command: the lines of a "$ " block up to the
	// next command, or the comment lines right after a command in a sh block (without "# ").
	Output []string
}

// Key identifies a command: its page and text.
type Key struct{ Page, Text string }

// Key is c's key.
func (c Command) Key() Key { return Key{Page: c.Page, Text: c.Text} }

// Read returns the commands of page (relative to root) in the order the page shows them.
func Read(root, page string) ([]Command, error) {
	raw, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", page, err)
	}
	return Parse(page, raw), nil
}

// Parse returns the commands of a page's text.
func Parse(page string, raw []byte) []Command {
	var (
		out     []Command
		inBlock bool
		shell   bool
		// open is the command being read when its line ended with a backslash.
		open *Command
		// last is the command the output lines that follow belong to (nil: none yet in the block).
		last = -1
	)
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if fence, ok := strings.CutPrefix(line, "```"); ok {
			if inBlock {
				inBlock, open, last = false, nil, -1
				continue
			}
			info := strings.TrimSpace(fence)
			inBlock, shell = true, info == "sh" || info == "bash" || info == "shell"
			continue
		}
		if !inBlock {
			continue
		}
		if open != nil {
			more := strings.TrimSpace(line)
			cont := strings.HasSuffix(more, `\`)
			open.Text += " " + strings.TrimSpace(strings.TrimSuffix(more, `\`))
			if !cont {
				open.Text, open.Comment = splitComment(open.Text)
				out = append(out, *open)
				last, open = len(out)-1, nil
			}
			continue
		}
		var text string
		switch {
		case shell:
			t := strings.TrimSpace(line)
			if t == "" {
				last = -1
				continue
			}
			if c, ok := strings.CutPrefix(t, "#"); ok {
				if last >= 0 {
					out[last].Output = append(out[last].Output, strings.TrimPrefix(c, " "))
				}
				continue
			}
			text = t
		default:
			t, ok := strings.CutPrefix(line, "$ ")
			if !ok {
				if last >= 0 {
					out[last].Output = append(out[last].Output, line)
				}
				continue
			}
			text = strings.TrimSpace(t)
		}
		c := Command{Page: page, Line: n}
		if strings.HasSuffix(text, `\`) {
			c.Text = strings.TrimSpace(strings.TrimSuffix(text, `\`))
			open = &c
			continue
		}
		c.Text, c.Comment = splitComment(text)
		out = append(out, c)
		last = len(out) - 1
	}
	return out
}

// splitComment splits a shell line into the command and its trailing comment: a "#" that
// starts a word outside quotes.
func splitComment(line string) (string, string) {
	var quote rune
	prev := ' '
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (prev == ' ' || prev == '\t'):
			return strings.TrimSpace(line[:i]), strings.TrimSpace(line[i+1:])
		}
		prev = r
	}
	return strings.TrimSpace(line), ""
}
