package trace

import "fmt"

// readRedactions reads and checks redactions.json.
func readRedactions(b *bundle) ([]RedactionEntry, error) {
	data, err := b.read(RedactionsFile)
	if err != nil {
		return nil, err
	}
	entries, err := parseRedactions(b.where(RedactionsFile), data)
	if err != nil {
		return nil, storageErr(err, "%s", err.Error())
	}
	return entries, nil
}

// parseRedactions parses redactions.json with the reference's messages.
func parseRedactions(name string, data []byte) ([]RedactionEntry, error) {
	v, err := ParseValue(data)
	if err != nil {
		return nil, fmt.Errorf("%s: invalid JSON: %w", name, err)
	}
	if v.Kind() != Object {
		return nil, fmt.Errorf("%s: invalid redactions object", name)
	}
	if sv := v.Get("schema_version"); sv.Canonical() != `"0.1"` {
		return nil, fmt.Errorf("%s: unsupported redactions schema version %s", name, pyRepr(sv))
	}
	bad := func(detail string) error { return fmt.Errorf("%s: invalid redactions metadata: %s", name, detail) }
	entries := []RedactionEntry{}
	for k, x := range v.Members() {
		switch k {
		case "schema_version":
		case "entries":
			if x.Kind() != Array {
				return nil, bad("entries must be a list")
			}
			for i, e := range x.Elems() {
				if e.Kind() != Object {
					return nil, bad(fmt.Sprintf("entries[%d] must be an object", i))
				}
				var r RedactionEntry
				for ek, ex := range e.Members() {
					s, ok := ex.Str()
					if !ok || s == "" {
						return nil, bad(fmt.Sprintf("entries[%d].%s must be a non-empty string", i, ek))
					}
					switch ek {
					case "event_id":
						r.EventID = s
					case "path":
						r.Path = s
					case "reason":
						r.Reason = s
					case "replacement":
						if s != Redacted {
							return nil, bad(fmt.Sprintf("entries[%d].replacement must be %q", i, Redacted))
						}
						r.Replacement = s
					default:
						return nil, bad(fmt.Sprintf("unknown field entries[%d].%s", i, ek))
					}
				}
				if r.EventID == "" || r.Path == "" || r.Reason == "" || r.Replacement == "" {
					return nil, bad(fmt.Sprintf("entries[%d] requires event_id, path, reason and replacement", i))
				}
				entries = append(entries, r)
			}
		default:
			return nil, bad(fmt.Sprintf("unknown field %q", k))
		}
	}
	return entries, nil
}

// appendRedactions appends redactions.json as Pydantic writes it.
func appendRedactions(dst []byte, entries []RedactionEntry) []byte {
	dst = append(dst, "{\n  \"schema_version\": \"0.1\",\n  \"entries\": ["...)
	if len(entries) == 0 {
		return append(dst, "]\n}\n"...)
	}
	for i, e := range entries {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, "\n    {\n      \"event_id\": "...)
		dst = appendQuoted(dst, e.EventID)
		dst = append(dst, ",\n      \"path\": "...)
		dst = appendQuoted(dst, e.Path)
		dst = append(dst, ",\n      \"reason\": "...)
		dst = appendQuoted(dst, e.Reason)
		dst = append(dst, ",\n      \"replacement\": "...)
		dst = appendQuoted(dst, Redacted)
		dst = append(dst, "\n    }"...)
	}
	return append(dst, "\n  ]\n}\n"...)
}
