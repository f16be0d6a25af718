package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Mutation is one line of a list: a rewrite of one safety rule and the test that must fail.
type Mutation struct {
	// Name is unique over all lists ("# name:" comment, else <list>:<line>).
	Name string
	// List is the list's file name without ".txt"; Line the line in it.
	List string
	Line int
	// File is the path of the mutated file, relative to the repository root.
	File string
	// Old is replaced by New (escapes resolved); Old must occur exactly once in File.
	Old, New string
	// Command is the test command, run with bash in the root of the scratch copy.
	Command string
}

// Qualified is "<list>/<name>".
func (m Mutation) Qualified() string { return m.List + "/" + m.Name }

var (
	nameComment = regexp.MustCompile(`^#\s*name:\s*(\S+)\s*$`)
	validName   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	goTest      = regexp.MustCompile(`(^|[;&|(]\s*|\s)go\s+test\s`)
	countOne    = regexp.MustCompile(`(^|\s)-?-count[= ]1(\s|$)`)
)

// ParseList reads one list. list is the list's name (its file name without ".txt"). Every
// malformed line is reported, each with its line number.
func ParseList(list string, r io.Reader) ([]Mutation, error) {
	var (
		out     []Mutation
		errs    []error
		pending string
		pendAt  int
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	n := 0
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.txt:%d: %s", list, n, fmt.Sprintf(format, args...)))
	}
	for sc.Scan() {
		n++
		line := strings.TrimSuffix(sc.Text(), "\r")
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "":
			continue
		case strings.HasPrefix(trimmed, "#"):
			if m := nameComment.FindStringSubmatch(trimmed); m != nil {
				if pending != "" {
					bad("name %q follows name %q (line %d), which names no mutation", m[1], pending, pendAt)
				}
				if !validName.MatchString(m[1]) {
					bad("name %q: use letters, digits, '.', '_' and '-'", m[1])
				}
				pending, pendAt = m[1], n
			} else if strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(trimmed, "#")), "name:") {
				bad("a name comment needs one word: # name: <short-name>")
			}
			continue
		}
		fields := splitFields(line)
		if len(fields) != 4 {
			bad("want 4 fields separated by '|' (file|old text|new text|test command), got %d", len(fields))
			pending = ""
			continue
		}
		m := Mutation{List: list, Line: n, File: unescapePipe(strings.TrimSpace(fields[0])),
			Old: Unescape(fields[1]), New: Unescape(fields[2]), Command: unescapePipe(strings.TrimSpace(fields[3]))}
		m.Name = pending
		if m.Name == "" {
			m.Name = fmt.Sprintf("%s:%d", list, n)
		}
		pending = ""
		switch {
		case m.File == "" || filepath.IsAbs(m.File) || !filepath.IsLocal(m.File):
			bad("file %q must be a path inside the repository, relative to its root", m.File)
		case m.Old == "":
			bad("old text is empty")
		case m.Old == m.New:
			bad("old and new text are the same: the mutation changes nothing")
		case m.Command == "":
			bad("test command is empty")
		case goTest.MatchString(m.Command) && !countOne.MatchString(m.Command):
			bad("the test command runs go test without -count=1: a cached result would prove nothing")
		default:
			out = append(out, m)
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s.txt: %w", list, err))
	}
	if pending != "" {
		errs = append(errs, fmt.Errorf("%s.txt:%d: name %q names no mutation", list, pendAt, pending))
	}
	return out, errors.Join(errs...)
}

// splitFields splits a line at each '|' that is not escaped as \|. Escapes stay in the fields.
func splitFields(line string) []string {
	var (
		fields []string
		start  int
	)
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case '\\':
			i++ // the escaped character is part of the field
		case '|':
			fields = append(fields, line[start:i])
			start = i + 1
		}
	}
	return append(fields, line[start:])
}

// unescapePipe resolves \| (a literal '|') in a file or command field.
func unescapePipe(s string) string { return strings.ReplaceAll(s, `\|`, "|") }

// Unescape resolves \n (newline), \t (tab), \| ('|') and \\ (backslash) in old and new text;
// any other backslash stays.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case 'n':
				b.WriteByte('\n')
				i++
				continue
			case 't':
				b.WriteByte('\t')
				i++
				continue
			case '\\', '|':
				b.WriteByte(s[i+1])
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// LoadLists parses every list matching glob (relative to repo unless absolute), in file-name
// order, and checks that names are unique over all of them.
func LoadLists(repo, glob string) ([]Mutation, error) {
	if !filepath.IsAbs(glob) {
		glob = filepath.Join(repo, glob)
	}
	files, err := filepath.Glob(glob)
	if err != nil {
		return nil, fmt.Errorf("lists %s: %w", glob, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no mutation list matches %s", glob)
	}
	sort.Strings(files)
	var (
		all  []Mutation
		errs []error
	)
	seen := map[string]string{}
	for _, f := range files {
		list := strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))
		r, err := os.Open(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("open list: %w", err))
			continue
		}
		ms, err := ParseList(list, r)
		_ = r.Close()
		if err != nil {
			errs = append(errs, err)
		}
		for _, m := range ms {
			if at, dup := seen[m.Name]; dup {
				errs = append(errs, fmt.Errorf("%s.txt:%d: name %q is already used at %s", list, m.Line, m.Name, at))
				continue
			}
			seen[m.Name] = fmt.Sprintf("%s.txt:%d", list, m.Line)
			all = append(all, m)
		}
	}
	return all, errors.Join(errs...)
}

// Select keeps the mutations that match any of the comma-separated shell globs in patterns,
// matched against the name and against "<list>/<name>". An empty patterns keeps all; a
// pattern that matches nothing is an error (a typo would otherwise run nothing and pass).
func Select(all []Mutation, patterns string) ([]Mutation, error) {
	var globs []string
	for _, p := range strings.Split(patterns, ",") {
		if p = strings.TrimSpace(p); p != "" {
			globs = append(globs, p)
		}
	}
	if len(globs) == 0 {
		return all, nil
	}
	used := make([]bool, len(globs))
	var out []Mutation
	for _, m := range all {
		keep := false
		for i, g := range globs {
			byName, err := path.Match(g, m.Name)
			if err != nil {
				return nil, fmt.Errorf("pattern %q: %w", g, err)
			}
			byList, _ := path.Match(g, m.Qualified())
			if byName || byList {
				used[i], keep = true, true
			}
		}
		if keep {
			out = append(out, m)
		}
	}
	var errs []error
	for i, g := range globs {
		if !used[i] {
			errs = append(errs, fmt.Errorf("pattern %q matches no mutation", g))
		}
	}
	return out, errors.Join(errs...)
}
