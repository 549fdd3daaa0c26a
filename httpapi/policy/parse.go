package policy

import (
	"fmt"
	"strconv"
	"strings"
)

// check is one parsed rule (or part of one).
type check interface {
	eval(target, creds map[string]any, e *Enforcer, depth int) bool
	String() string
}

type trueCheck struct{}
type falseCheck struct{}
type notCheck struct{ c check }
type andCheck struct{ cs []check }
type orCheck struct{ cs []check }

// ruleCheck is rule:NAME, the named rule's verdict.
type ruleCheck struct{ name string }

// roleCheck is role:NAME: one of the caller's roles, case-insensitively.
type roleCheck struct{ match string }

// genericCheck is KIND:MATCH: the credential KIND (a dotted path) equals
// MATCH after %(key)s substitution from the target, compared as Python
// strings (None, True, False) as oslo.policy does; or KIND is a literal.
type genericCheck struct{ kind, match string }

func (trueCheck) eval(map[string]any, map[string]any, *Enforcer, int) bool  { return true }
func (falseCheck) eval(map[string]any, map[string]any, *Enforcer, int) bool { return false }
func (c notCheck) eval(t, cr map[string]any, e *Enforcer, d int) bool       { return !c.c.eval(t, cr, e, d) }
func (c andCheck) eval(t, cr map[string]any, e *Enforcer, d int) bool {
	for _, x := range c.cs {
		if !x.eval(t, cr, e, d) {
			return false
		}
	}
	return true
}
func (c orCheck) eval(t, cr map[string]any, e *Enforcer, d int) bool {
	for _, x := range c.cs {
		if x.eval(t, cr, e, d) {
			return true
		}
	}
	return false
}

// maxDepth stops a rule that refers to itself (a:rule:b, b:rule:a) from
// recursing forever; such a loop is refused at load time anyway.
const maxDepth = 32

func (c ruleCheck) eval(t, cr map[string]any, e *Enforcer, d int) bool {
	r, ok := e.rules[c.name]
	if !ok || d > maxDepth {
		return false // oslo.policy: an undefined rule is False
	}
	return r.check.eval(t, cr, e, d+1)
}

func (c roleCheck) eval(t, cr map[string]any, _ *Enforcer, _ int) bool {
	m, ok := substitute(c.match, t)
	if !ok {
		return false
	}
	roles, _ := cr["roles"].([]string)
	for _, r := range roles {
		if strings.EqualFold(r, m) {
			return true
		}
	}
	return false
}

func (c genericCheck) eval(t, cr map[string]any, _ *Enforcer, _ int) bool {
	m, ok := substitute(c.match, t)
	if !ok {
		return false
	}
	if lit, ok := literal(c.kind); ok {
		return m == lit
	}
	return findIn(cr, strings.Split(c.kind, "."), m)
}

// findIn is oslo.policy's _find_in_dict: walk the path; a list matches
// when any element does.
func findIn(v any, path []string, match string) bool {
	if len(path) == 0 {
		return match == pyStr(v)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	next, ok := m[path[0]]
	if !ok {
		return false
	}
	if list, ok := next.([]string); ok {
		for _, x := range list {
			if findIn(x, path[1:], match) {
				return true
			}
		}
		return false
	}
	return findIn(next, path[1:], match)
}

// pyStr is Python's str() of a credential or target value.
func pyStr(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case string:
		return x
	case bool:
		if x {
			return "True"
		}
		return "False"
	case *string:
		if x == nil {
			return "None"
		}
		return *x
	}
	return fmt.Sprint(v)
}

// literal is ast.literal_eval of a check's kind, for the literals a rule
// may hold ('Member', True, 42); ok false for a name.
func literal(kind string) (string, bool) {
	if len(kind) >= 2 && (kind[0] == '\'' || kind[0] == '"') && kind[len(kind)-1] == kind[0] {
		return kind[1 : len(kind)-1], true
	}
	switch kind {
	case "True", "False", "None":
		return kind, true
	}
	if _, err := strconv.ParseFloat(kind, 64); err == nil {
		return kind, true
	}
	return "", false
}

// substitute is Python's "match % target" for %(key)s and %%; ok false
// when a key is missing (oslo.policy then answers False).
func substitute(s string, target map[string]any) (string, bool) {
	if !strings.Contains(s, "%") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '%' {
			b.WriteByte('%')
			i++
			continue
		}
		if i+1 >= len(s) || s[i+1] != '(' {
			return "", false
		}
		end := strings.Index(s[i:], ")s")
		if end < 0 {
			return "", false
		}
		v, ok := target[s[i+2:i+end]]
		if !ok {
			return "", false
		}
		b.WriteString(pyStr(v))
		i += end + 1
	}
	return b.String(), true
}

func (trueCheck) String() string      { return "@" }
func (falseCheck) String() string     { return "!" }
func (c notCheck) String() string     { return "not " + c.c.String() }
func (c ruleCheck) String() string    { return "rule:" + c.name }
func (c roleCheck) String() string    { return "role:" + c.match }
func (c genericCheck) String() string { return c.kind + ":" + c.match }
func (c andCheck) String() string     { return join(c.cs, " and ") }
func (c orCheck) String() string      { return join(c.cs, " or ") }

func join(cs []check, sep string) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.String()
		if _, ok := c.(orCheck); ok {
			parts[i] = "(" + parts[i] + ")"
		} else if _, ok := c.(andCheck); ok && sep == " and " {
			parts[i] = "(" + parts[i] + ")"
		}
	}
	return strings.Join(parts, sep)
}

// ParseError is a check string that does not parse.
type ParseError struct {
	Rule, Msg string
}

func (e *ParseError) Error() string { return fmt.Sprintf("%q: %s", e.Rule, e.Msg) }

// token kinds of the rule language.
const (
	tOpen = iota
	tClose
	tAnd
	tOr
	tNot
	tCheck
)

type token struct {
	kind int
	text string
}

// tokenize splits as oslo.policy's _parse_tokenize: on whitespace, with
// parentheses peeled off each word's ends.
func tokenize(rule string) []token {
	var out []token
	for _, word := range strings.Fields(rule) {
		clean := strings.TrimLeft(word, "(")
		for range len(word) - len(clean) {
			out = append(out, token{kind: tOpen})
		}
		inner := strings.TrimRight(clean, ")")
		closes := len(clean) - len(inner)
		if inner != "" {
			switch strings.ToLower(inner) {
			case "and":
				out = append(out, token{kind: tAnd})
			case "or":
				out = append(out, token{kind: tOr})
			case "not":
				out = append(out, token{kind: tNot})
			default:
				out = append(out, token{kind: tCheck, text: inner})
			}
		}
		for range closes {
			out = append(out, token{kind: tClose})
		}
	}
	return out
}

type parser struct {
	rule string
	toks []token
	pos  int
}

// Parse parses an oslo.policy check string; an empty one allows everyone
// (oslo.policy's TrueCheck).
func Parse(rule string) (check, error) {
	p := &parser{rule: rule, toks: tokenize(rule)}
	if len(p.toks) == 0 {
		return trueCheck{}, nil
	}
	c, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.toks) {
		return nil, p.fail("unexpected %s", p.describe())
	}
	return c, nil
}

func (p *parser) fail(format string, args ...any) error {
	return &ParseError{Rule: p.rule, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) describe() string {
	if p.pos >= len(p.toks) {
		return "end of rule"
	}
	switch t := p.toks[p.pos]; t.kind {
	case tOpen:
		return `"("`
	case tClose:
		return `")"`
	case tAnd:
		return `"and"`
	case tOr:
		return `"or"`
	case tNot:
		return `"not"`
	default:
		return fmt.Sprintf("%q", t.text)
	}
}

func (p *parser) peek(kind int) bool { return p.pos < len(p.toks) && p.toks[p.pos].kind == kind }

func (p *parser) or() (check, error) {
	first, err := p.and()
	if err != nil {
		return nil, err
	}
	cs := []check{first}
	for p.peek(tOr) {
		p.pos++
		c, err := p.and()
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	if len(cs) == 1 {
		return first, nil
	}
	return orCheck{cs}, nil
}

func (p *parser) and() (check, error) {
	first, err := p.not()
	if err != nil {
		return nil, err
	}
	cs := []check{first}
	for p.peek(tAnd) {
		p.pos++
		c, err := p.not()
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	if len(cs) == 1 {
		return first, nil
	}
	return andCheck{cs}, nil
}

func (p *parser) not() (check, error) {
	if p.peek(tNot) {
		p.pos++
		c, err := p.not()
		if err != nil {
			return nil, err
		}
		return notCheck{c}, nil
	}
	return p.atom()
}

func (p *parser) atom() (check, error) {
	switch {
	case p.peek(tOpen):
		p.pos++
		c, err := p.or()
		if err != nil {
			return nil, err
		}
		if !p.peek(tClose) {
			return nil, p.fail(`missing ")" before %s`, p.describe())
		}
		p.pos++
		return c, nil
	case p.peek(tCheck):
		t := p.toks[p.pos]
		p.pos++
		return p.check(t.text)
	}
	return nil, p.fail("expected a check before %s", p.describe())
}

// check parses one KIND:MATCH (or @, !).
func (p *parser) check(text string) (check, error) {
	switch text {
	case "@":
		return trueCheck{}, nil
	case "!":
		return falseCheck{}, nil
	}
	kind, match, ok := strings.Cut(text, ":")
	if !ok || kind == "" {
		return nil, p.fail("%q is not a check (want kind:match, @ or !)", text)
	}
	if strings.Contains(match, "%") {
		if _, ok := substitute(match, map[string]any{}); !ok && !validSubst(match) {
			return nil, p.fail("%q: bad %%(key)s substitution", text)
		}
	}
	switch kind {
	case "rule":
		if match == "" {
			return nil, p.fail("%q names no rule", text)
		}
		return ruleCheck{match}, nil
	case "role":
		return roleCheck{match}, nil
	case "http", "https":
		return nil, p.fail("%q: http checks are not supported", text)
	}
	return genericCheck{kind, match}, nil
}

// validSubst reports whether every % in s starts %% or %(key)s.
func validSubst(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		if i+1 < len(s) && s[i+1] == '%' {
			i++
			continue
		}
		if i+1 >= len(s) || s[i+1] != '(' {
			return false
		}
		end := strings.Index(s[i:], ")s")
		if end < 0 {
			return false
		}
		i += end + 1
	}
	return true
}

// refs lists the rule names c refers to.
func refs(c check, out []string) []string {
	switch x := c.(type) {
	case ruleCheck:
		return append(out, x.name)
	case notCheck:
		return refs(x.c, out)
	case andCheck:
		for _, y := range x.cs {
			out = refs(y, out)
		}
	case orCheck:
		for _, y := range x.cs {
			out = refs(y, out)
		}
	}
	return out
}
