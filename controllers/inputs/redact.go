package inputs

// WithRedacted returns a copy of in whose redact list also holds values (and the form each
// takes inside a JSON string): values a run receives another way than as variables, such as
// the variables of a TerraformIdentity, which the runner must mask in what it prints and
// reports too. The variables and the hash are unchanged, so the copy is for the per-run Secret
// only; the durable inputs Secret never holds these values.
func WithRedacted(in *Inputs, values ...string) *Inputs {
	r := redactSet{}
	for _, v := range in.Redact {
		r[v] = struct{}{}
	}
	for _, v := range values {
		r.addString(v)
	}
	out := *in
	out.Redact = r.list()
	return &out
}
