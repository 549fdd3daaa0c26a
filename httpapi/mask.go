package httpapi

import (
	"regexp"
	"strings"
	"sync"

	"castiron/fault/pyrepr"
)

// Masking as Ironic does it in every view (node_sanitize, the volume target
// and deploy template views): oslo.utils' strutils.mask_dict_password with
// "******" on driver_info, instance_info, driver_internal_info (so the
// agent token is never shown), target properties and step args, plus the
// few keys Ironic masks by name. PATCH documents and the engine see the
// stored values.

const maskSecret = "******"

// sanitizeKeys are strutils._SANITIZE_KEYS: a dict key containing one of
// them (case-insensitively) has its value masked.
var sanitizeKeys = []string{
	"adminpass", "admin_pass", "password", "admin_password", "auth_token", "new_pass", "auth_password",
	"secret_uuid", "secret", "sys_pswd", "token", "configdrive", "chappassword", "encrypted_key",
	"private_key", "fernetkey", "sslkey", "passphrase", "cephclusterfsid", "octaviaheartbeatkey",
	"rabbitcookie", "cephmanilaclientkey", "pacemakerremoteauthkey", "designaterndckey", "cephadminkey",
	"heatauthencryptionkey", "cephclientkey", "keystonecredential", "barbicansimplecryptokek",
	"cephrgwkey", "swifthashsuffix", "migrationsshkey", "cephmdskey", "cephmonkey",
}

// sanitizedKey reports whether a dict key names a secret.
func sanitizedKey(k string) bool {
	lk := strings.ToLower(k)
	for _, s := range sanitizeKeys {
		if strings.Contains(lk, s) {
			return true
		}
	}
	return false
}

// maskPatterns are strutils.mask_password's substitutions for one key, in
// its order: a (prefix)(secret)(suffix) regexp each; the secret part is
// replaced, prefix and suffix kept.
type maskPatterns struct {
	twoGroup []*regexp.Regexp // ${1}******${2}
	oneGroup []*regexp.Regexp // ${1}******
	wildcard []*regexp.Regexp // ${1}${2}: the quoted value is dropped
}

// The shapes a secret takes inside a string value (key=value, key="v",
// "key": "v", --key v, <key>v</key>, ...), with %[1]s the key; Python's
// re.DOTALL|re.IGNORECASE are (?is).
var (
	maskTwoGroup = []string{
		`(%[1]s[0-9]*\s*[=]\s*[\"'])[^\"']*([\"'])`,
		`(%[1]s[0-9]*\s*[=]\s*[\"])[^\"]*([\"])`,
		`(%[1]s[0-9]*\s*[=]\s*['])[^']*(['])`,
		`(%[1]s[0-9]*\s+[\"'])[^\"']*([\"'])`,
		`([-]{2}%[1]s[0-9]*\s+)[^'\"=\s]+(\s*)`,
		`(<%[1]s[0-9]*>)[^<]*(</%[1]s[0-9]*>)`,
		`([\"']%[1]s[0-9]*[\"']\s*:\s*[\"'])[^\"']*([\"'])`,
		`(['\"][^\"']*%[1]s[0-9]*['\"]\s*:\s*u?['\"])[^\"']*(['\"])`,
		`(['\"][^'\"]*%[1]s[0-9]*['\"]\s*,\s*'--?[A-z]+'\s*,\s*u?['\"])[^\"']*(['\"])`,
		`(%[1]s[0-9]*\s*--?[A-z]+\s*)\S+(\s*)`,
	}
	maskOneGroup = []string{`(%[1]s[0-9]*\s*[=]\s*)[^\s'\"]+`}
	maskWildcard = []string{`(['\"][^\"']*%[1]s[0-9]*['\"]\s*:\s*u?['\"].*['\"])[^\"']*(['\"])`}
)

// maskByKey holds each key's patterns, compiled on first use: compiling
// all of them (35 keys × 10 case-insensitive regexps) at start-up cost
// ~3 MB of heap and 30 ms, and most servers never mask inside a string.
var maskByKey = func() map[string]func() *maskPatterns {
	compile := func(srcs []string, key string) []*regexp.Regexp {
		out := make([]*regexp.Regexp, len(srcs))
		for i, src := range srcs {
			out[i] = regexp.MustCompile(`(?is)` + strings.ReplaceAll(src, "%[1]s", regexp.QuoteMeta(key)))
		}
		return out
	}
	m := make(map[string]func() *maskPatterns, len(sanitizeKeys))
	for _, k := range sanitizeKeys {
		m[k] = sync.OnceValue(func() *maskPatterns {
			return &maskPatterns{compile(maskTwoGroup, k), compile(maskOneGroup, k), compile(maskWildcard, k)}
		})
	}
	return m
}()

// maskPassword is strutils.mask_password(s, "******"): secrets written
// inside a string ("--password x", "token=y", ...) are masked.
func maskPassword(s string) string {
	lower := strings.ToLower(s)
	for _, k := range sanitizeKeys {
		if !strings.Contains(lower, k) {
			continue
		}
		p := maskByKey[k]()
		for _, re := range p.twoGroup {
			s = re.ReplaceAllString(s, "${1}"+maskSecret+"${2}")
		}
		for _, re := range p.oneGroup {
			s = re.ReplaceAllString(s, "${1}"+maskSecret)
		}
		for _, re := range p.wildcard {
			s = re.ReplaceAllString(s, "${1}${2}")
		}
	}
	return s
}

// maskDict is strutils.mask_dict_password(d, "******"): values under a
// secret key are masked, nested dicts are masked in turn, and string values
// are masked inside.
func maskDict(d map[string]any) map[string]any {
	if d == nil {
		return nil
	}
	out := make(map[string]any, len(d))
	for k, v := range d {
		if m, ok := v.(map[string]any); ok {
			out[k] = maskDict(m)
		} else if sanitizedKey(k) {
			out[k] = maskSecret
		} else if s, ok := v.(string); ok {
			out[k] = maskPassword(s)
		} else {
			out[k] = v
		}
	}
	return out
}

// maskDictPassword is maskDict for a table's mask column.
func maskDictPassword(v any) any {
	d, ok := v.(map[string]any)
	if !ok {
		return v
	}
	return maskDict(d)
}

// maskDictAnd is mask_dict_password followed by Ironic's _mask_fields:
// the named keys are masked too when they hold a value.
func maskDictAnd(keys ...string) func(any) any {
	return func(v any) any {
		d, ok := v.(map[string]any)
		if !ok {
			return v
		}
		out := maskDict(d)
		for _, k := range keys {
			if pyrepr.Truth(out[k]) {
				out[k] = maskSecret
			}
		}
		return out
	}
}

var (
	// maskDriverInfo is node_sanitize on driver_info: the SNMP keys too.
	maskDriverInfo = maskDictAnd("snmp_auth_key", "snmp_priv_key")
	// maskInstanceInfo is node_sanitize on instance_info: the config drive
	// (which may be a dict) and image_url (a temporary URL) too.
	maskInstanceInfo = maskDictAnd("configdrive", "image_url")
)
