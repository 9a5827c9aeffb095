package trace

import (
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"slices"
)

// IntegrityStatus is the outcome of VerifyIntegrity.
type IntegrityStatus string

// Integrity statuses.
const (
	IntegrityVerified         IntegrityStatus = "verified"
	IntegrityMismatch         IntegrityStatus = "mismatch"
	IntegrityUnverifiedLegacy IntegrityStatus = "unverified_legacy"
)

// Issue codes of [VerifyIntegrity], as Python stepfork reports them: a bundle
// without integrity.json, an integrity.json that cannot be used, a digest
// algorithm other than sha256, a file it lists that is missing, and a file
// whose digest differs.
const (
	CodeIntegrityUnverified      = "integrity_unverified"
	CodeIntegrityMetadataInvalid = "integrity_metadata_invalid"
	CodeIntegrityAlgorithm       = "integrity_algorithm_unsupported"
	CodeMissingFile              = "missing_file"
	CodeIntegrityMismatch        = "integrity_mismatch"
)

// IntegrityIssue is one problem found by VerifyIntegrity.
type IntegrityIssue struct {
	Code    string
	Message string
	File    string
}

// IntegrityResult is the outcome of VerifyIntegrity: a status, the issues, and
// the files whose digests matched, in the order integrity.json lists them
// (manifest, events, redactions, then extra files).
type IntegrityResult struct {
	Status        IntegrityStatus
	Issues        []IntegrityIssue
	VerifiedFiles []string
}

// integrityRecord is integrity.json.
type integrityRecord struct {
	Algorithm string
	Files     []integrityEntry // in file order
}

type integrityEntry struct {
	Name, Digest string
}

func (r *integrityRecord) digest(name string) (string, bool) {
	for _, f := range r.Files {
		if f.Name == name {
			return f.Digest, true
		}
	}
	return "", false
}

// errIntegrityRecord is the ways integrity.json itself can be unusable; cause
// is the storage error when it cannot be read at all (not a regular file of
// the bundle, or above its size limit).
type errIntegrityRecord struct {
	issue IntegrityIssue
	cause error
}

func (e *errIntegrityRecord) Error() string { return e.issue.Message }

// parseIntegrityRecord reads integrity.json of b; (nil, nil) means it is
// absent.
func parseIntegrityRecord(b *bundle) (*integrityRecord, error) {
	invalid := func(msg string) error {
		return &errIntegrityRecord{issue: IntegrityIssue{CodeIntegrityMetadataInvalid, msg, IntegrityFile}}
	}
	data, err := b.read(IntegrityFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case errors.Is(err, errFileTooLarge):
		return nil, &errIntegrityRecord{IntegrityIssue{CodeIntegrityMetadataInvalid,
			fmt.Sprintf("integrity.json is larger than the limit of %d bytes.", maxIntegrityBytes), IntegrityFile}, err}
	case err != nil:
		return nil, &errIntegrityRecord{IntegrityIssue{CodeIntegrityMetadataInvalid, "integrity.json is not a file.", IntegrityFile}, err}
	}
	v, err := ParseValue(data)
	if err != nil {
		return nil, invalid("integrity.json is not valid JSON.")
	}
	meta := invalid("integrity.json metadata is invalid.")
	if v.Kind() != Object || v.Get("schema_version").Canonical() != `"0.1"` {
		return nil, meta
	}
	rec := &integrityRecord{Algorithm: "sha256"}
	for k, x := range v.Members() {
		switch k {
		case "schema_version":
		case "algorithm":
			s, ok := x.Str()
			if !ok {
				return nil, meta
			}
			rec.Algorithm = s
		case "files":
			if x.Kind() != Object {
				return nil, meta
			}
			for name, d := range x.Members() {
				s, ok := d.Str()
				if !ok {
					return nil, meta
				}
				rec.Files = append(rec.Files, integrityEntry{name, s})
			}
		default:
			return nil, meta
		}
	}
	// Members come in key order; list the core files first, as written.
	slices.SortStableFunc(rec.Files, func(a, b integrityEntry) int { return fileRank(a.Name) - fileRank(b.Name) })
	if extras := rec.extras(); len(extras) > maxExtraFiles {
		err := checkExtrasBudget(b.where(IntegrityFile), extras, func(string) int64 { return 0 })
		return nil, &errIntegrityRecord{IntegrityIssue{CodeIntegrityMetadataInvalid, extrasBudgetMessage(err), IntegrityFile}, err}
	}
	return rec, nil
}

// extrasBudgetMessage is the integrity issue of a bundle whose extra files
// are above the budget of a bundle.
func extrasBudgetMessage(err error) string {
	return fmt.Sprintf("integrity.json cannot be used: %v.", err)
}

func fileRank(name string) int {
	if i := slices.Index(coreFiles, name); i >= 0 {
		return i
	}
	return len(coreFiles)
}

// VerifyIntegrity checks the SHA-256 digests that integrity.json records
// against the bytes on disk. It never changes the bundle. A bundle without
// integrity.json is IntegrityUnverifiedLegacy. Besides the three core files,
// every extra file listed in integrity.json (fork.json, say) is verified too.
// Digests are compared in constant time.
func VerifyIntegrity(path string) IntegrityResult {
	b, err := openBundle(path)
	if err != nil {
		code := CodeIntegrityMetadataInvalid
		if errors.Is(err, fs.ErrNotExist) {
			code = CodeMissingFile
		}
		return IntegrityResult{Status: IntegrityMismatch, Issues: []IntegrityIssue{{code, fmt.Sprintf("%v.", err), IntegrityFile}}}
	}
	defer b.Close()
	return verifyBundle(b, nil)
}

// verifyBundle is VerifyIntegrity of an opened bundle, with the digests
// already computed in known, by file name (events.jsonl hashed while it
// was streamed, say).
func verifyBundle(b *bundle, known map[string]string) IntegrityResult {
	rec, err := b.integrity()
	if err != nil {
		var ie *errIntegrityRecord
		errors.As(err, &ie)
		return IntegrityResult{Status: IntegrityMismatch, Issues: []IntegrityIssue{ie.issue}}
	}
	if rec == nil {
		return IntegrityResult{Status: IntegrityUnverifiedLegacy, Issues: []IntegrityIssue{{
			CodeIntegrityUnverified, "Bundle has no integrity.json metadata.", IntegrityFile}}}
	}
	return rec.verify(b, known)
}

// verify checks every listed file of b. known holds digests already
// computed (for example events.jsonl hashed while streaming), keyed by file
// name.
func (rec *integrityRecord) verify(b *bundle, known map[string]string) IntegrityResult {
	res := IntegrityResult{Status: IntegrityVerified}
	fail := func(code, msg, file string) {
		res.Status = IntegrityMismatch
		res.Issues = append(res.Issues, IntegrityIssue{code, msg, file})
	}
	if rec.Algorithm != "sha256" {
		fail(CodeIntegrityAlgorithm, fmt.Sprintf("Unsupported integrity algorithm '%s'.", rec.Algorithm), IntegrityFile)
		return res
	}
	names := slices.Clone(coreFiles)
	for _, f := range rec.Files {
		if !slices.Contains(coreFiles, f.Name) {
			names = append(names, f.Name)
		}
	}
	for _, name := range names {
		d, ok := rec.digest(name)
		switch {
		case !ok:
			fail(CodeIntegrityMetadataInvalid, fmt.Sprintf("Missing digest for %s.", name), name)
		case !isHexDigest(d):
			fail(CodeIntegrityMetadataInvalid, fmt.Sprintf("Invalid SHA-256 digest for %s.", name), name)
		}
	}
	if res.Status != IntegrityVerified {
		return res
	}
	for _, name := range names {
		want, _ := rec.digest(name)
		got, ok := known[name]
		if !ok {
			if !validExtraName(name) && !slices.Contains(coreFiles, name) {
				fail(CodeIntegrityMetadataInvalid, fmt.Sprintf("Invalid file name %q in integrity.json.", name), IntegrityFile)
				continue
			}
			var err error
			got, err = b.digest(name)
			if err != nil {
				fail(CodeMissingFile, unreadableMessage(name, err), name)
				continue
			}
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			fail(CodeIntegrityMismatch, "SHA-256 mismatch.", name)
			continue
		}
		res.VerifiedFiles = append(res.VerifiedFiles, name)
	}
	return res
}

// unreadableMessage is the integrity issue of a listed file that cannot be
// hashed: stepfork's "<name> is missing." when it is absent, otherwise what
// it is instead of a regular file of the bundle, or why it cannot be read.
func unreadableMessage(name string, err error) string {
	var ke *fileKindError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("%s is missing.", name)
	case errors.As(err, &ke):
		return fmt.Sprintf("%s cannot be verified: it is %s.", name, ke.what)
	case errors.Is(err, errFileTooLarge):
		return fmt.Sprintf("%s cannot be verified: it is larger than the limit of %d bytes.", name, fileLimit(name))
	case errors.Is(err, ErrCorruptPacked):
		return fmt.Sprintf("%s cannot be verified: %v.", name, err)
	}
	return fmt.Sprintf("%s cannot be read.", name)
}

// appendIntegrity appends integrity.json for the given files, as Pydantic
// writes it.
func appendIntegrity(dst []byte, files []bundleFile) []byte {
	dst = append(dst, "{\n  \"schema_version\": \"0.1\",\n  \"algorithm\": \"sha256\",\n  \"files\": {"...)
	for i, f := range files {
		if i > 0 {
			dst = append(dst, ',')
		}
		sum := f.digest() // events.jsonl is hashed while it is streamed
		dst = append(dst, "\n    "...)
		dst = appendQuoted(dst, f.name)
		dst = append(dst, ": \""...)
		dst = hex.AppendEncode(dst, sum[:])
		dst = append(dst, '"')
	}
	return append(dst, "\n  }\n}\n"...)
}
