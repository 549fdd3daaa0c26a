package inspectrules

import (
	"net/netip"
	"regexp"
	"strings"

	"castiron/fault/pyrepr"
)

// checkCondition runs one condition operator on its processed arguments.
func checkCondition(op string, args map[string]any) (bool, error) {
	switch op {
	case "eq", "lt", "gt":
		return compareAll(op, args["values"], truthy(args["force_strings"]))
	case "is-empty":
		switch pyStr(args["value"]) {
		case "", "None", "[]", "{}":
			return true, nil
		}
		return false, nil
	case "in-net":
		return inNet(args["address"], args["subnet"])
	case "matches", "contains":
		return regexCheck(op, args["value"], args["regex"])
	case "one-of":
		values, has := args["values"]
		if !has {
			values = []any{}
		}
		return pyContains(values, args["value"])
	case "is-none":
		return args["value"] == nil, nil
	case "is-true":
		switch v := unwrap(args["value"]).(type) {
		case bool:
			return v, nil
		case string:
			l := strings.ToLower(v)
			return l == "yes" || l == "true", nil
		}
		if n, ok := numberOf(args["value"]); ok {
			return !n.isZero(), nil
		}
		return false, nil
	case "is-false":
		switch v := unwrap(args["value"]).(type) {
		case nil:
			return true, nil
		case bool:
			return !v, nil
		case string:
			l := strings.ToLower(v)
			return l == "no" || l == "false", nil
		}
		if n, ok := numberOf(args["value"]); ok {
			return n.isZero(), nil
		}
		return false, nil
	}
	return false, executionFailure("Unsupported operator '%s'.", op)
}

// compareAll is SimpleOperator: every neighbouring pair of values stands
// in the relation (a list of fewer than two values always does).
func compareAll(op string, raw any, forceStrings bool) (bool, error) {
	values, ok := unwrap(raw).([]any)
	if !ok {
		return false, conditionFailure("Failed to check condition: '" + op + "' on values: " + pyStr(raw) +
			": Expected list for 'values', got: " + pyTypeName(raw))
	}
	if len(values) < 2 {
		return true, nil
	}
	if forceStrings {
		strs := make([]any, len(values))
		for i, v := range values {
			strs[i] = pyStr(v)
		}
		values = strs
	}
	for i := 0; i+1 < len(values); i++ {
		var holds bool
		switch op {
		case "eq":
			holds = pyEqual(values[i], values[i+1])
		case "lt":
			lt, err := pyLess(values[i], values[i+1], "<")
			if err != nil {
				return false, err
			}
			holds = lt
		case "gt":
			gt, err := pyLess(values[i+1], values[i], ">")
			if err != nil {
				return false, err
			}
			holds = gt
		}
		if !holds {
			return false, nil
		}
	}
	return true, nil
}

// inNet is netaddr.IPAddress(address) in netaddr.IPNetwork(subnet). A
// network may be written with host bits or as a bare address.
func inNet(address, subnet any) (bool, error) {
	s := strings.TrimSpace(pyStr(subnet))
	prefix, err := netip.ParsePrefix(s)
	if err != nil {
		addr, aerr := netip.ParseAddr(s)
		if aerr != nil {
			return false, executionFailure("invalid value: invalid IPNetwork %s", s)
		}
		prefix = netip.PrefixFrom(addr, addr.BitLen())
	}
	a := pyStr(address)
	addr, err := netip.ParseAddr(strings.TrimSpace(a))
	if err != nil {
		return false, &pyError{"AddrFormatError", "failed to detect a valid IP address from " + pyrepr.Quote(a)}
	}
	return prefix.Contains(addr.Unmap()) || prefix.Contains(addr), nil
}

// regexCheck is MatchesOperator (a match of the whole value: Python's
// re.match with "$" appended) and ContainsOperator (re.search).
func regexCheck(op string, value, rawRegex any) (bool, error) {
	expr, ok := rawRegex.(string)
	if !ok {
		return false, typeErr("first argument must be string or compiled pattern")
	}
	if _, err := regexp.Compile(expr); err != nil {
		return false, executionFailure("invalid regular expression: %s", err)
	}
	if op == "matches" {
		if expr == "" {
			return false, &pyError{"IndexError", "string index out of range"}
		}
		expr = anchorEnd(expr)
		expr = `^(?:` + expr + `)`
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return false, executionFailure("invalid regular expression: %s", err)
	}
	return re.MatchString(pyStr(value)), nil
}

// anchorEnd makes the pattern end as Python's "$" does: at the end or
// before a final newline. Ironic appends "$" unless the pattern ends with
// one already.
func anchorEnd(expr string) string {
	if !strings.HasSuffix(expr, "$") {
		return expr + `\n?\z`
	}
	// An escaped "\$" is a literal dollar: count the backslashes before it.
	n := 0
	for i := len(expr) - 2; i >= 0 && expr[i] == '\\'; i-- {
		n++
	}
	if n%2 == 1 {
		return expr
	}
	return expr[:len(expr)-1] + `\n?\z`
}
