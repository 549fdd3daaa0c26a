package coldplug

import (
	"path"
	"strings"
)

// aliasPattern is one modules.alias line.
type aliasPattern struct {
	pattern string
	module  string
	// literal is the pattern's text before its first special character:
	// a modalias not starting with it cannot match, which rules out almost
	// every alias without running the matcher (this runs under emulation).
	literal string
	// matchPattern is pattern in path.Match's dialect (see newAliasPattern).
	matchPattern string
}

func newAliasPattern(pattern, module string) aliasPattern {
	literal := pattern
	if i := strings.IndexAny(pattern, `*?[\`); i >= 0 {
		literal = pattern[:i]
	}
	return aliasPattern{pattern: pattern, module: module, literal: literal, matchPattern: toPathMatch(pattern)}
}

// match reports whether a device's modalias matches, with kmod's semantics:
// fnmatch(3) without flags.
func (p aliasPattern) match(modalias string) bool {
	if !strings.HasPrefix(modalias, p.literal) {
		return false
	}
	ok, err := path.Match(p.matchPattern, strings.ReplaceAll(modalias, "/", slashStandIn))
	return err == nil && ok
}

// slashStandIn replaces '/' on both sides of path.Match, which keeps '*'
// and '?' from matching '/' where fnmatch without FNM_PATHNAME does not.
// Neither sysfs attributes nor kernel aliases contain a NUL.
const slashStandIn = "\x00"

// toPathMatch rewrites an fnmatch pattern for path.Match: '/' becomes
// slashStandIn, and a class negated fnmatch's way, "[!...]", becomes
// "[^...]". Escapes ('\x') and the rest mean the same in both.
func toPathMatch(pattern string) string {
	if !strings.ContainsAny(pattern, "/!") {
		return pattern
	}
	var b strings.Builder
	inClass := false
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case c == '\\' && i+1 < len(pattern):
			b.WriteByte(c)
			i++
			c = pattern[i]
		case c == '[' && !inClass:
			inClass = true
			if i+1 < len(pattern) && pattern[i+1] == '!' {
				b.WriteString("[^")
				i++
				continue
			}
		case c == ']' && inClass:
			inClass = false
		}
		if c == '/' {
			b.WriteString(slashStandIn)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
