package inputs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// parseJSON decodes exactly one JSON value, keeping numbers as json.Number so no precision is
// lost between what a user wrote and what Terraform reads.
func parseJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

// canonicalJSON encodes v with object keys sorted at every depth (encoding/json sorts map keys),
// no insignificant whitespace and no HTML escaping. Values built by parseJSON (maps, slices,
// json.Number, strings, bools, nil) encode the same way every time.
func canonicalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode canonical json: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
