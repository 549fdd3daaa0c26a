package appliance

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// configFlag names the flag (and CASTIRON_CONFIG) that points at the
// configuration file; it is the one flag the file itself cannot set.
const configFlag = "config"

// envName is the environment variable of a flag: --data-dir reads
// CASTIRON_DATA_DIR.
func envName(flagName string) string {
	return "CASTIRON_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// resolveFlags fills every flag of fs that args did not set from its
// environment variable, or else from its key in the configuration file
// (--config or CASTIRON_CONFIG), or else leaves its default: flag >
// environment > file > default. The file's keys are the flag names, so a flag
// added to fs is a key at once. A value that does not parse, wherever it comes
// from, and a key no flag has, are errors naming it.
func resolveFlags(fs *flag.FlagSet, args []string, lookupEnv func(string) (string, bool)) error {
	_, err := resolveFlagsArgs(fs, args, lookupEnv, 0)
	return err
}

// resolveFlagsArgs is resolveFlags for a command that also takes n
// arguments after its flags (castiron backup FILE); it returns them.
func resolveFlagsArgs(fs *flag.FlagSet, args []string, lookupEnv func(string) (string, bool), n int) ([]string, error) {
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case fs.NArg() > n:
		return nil, fmt.Errorf("unexpected argument %q (see -h)", fs.Arg(n))
	case fs.NArg() < n:
		return nil, fmt.Errorf("missing argument (see -h)")
	}
	return fs.Args(), resolveRest(fs, lookupEnv)
}

// resolveRest applies the environment and the configuration file to the
// flags the command line did not set.
func resolveRest(fs *flag.FlagSet, lookupEnv func(string) (string, bool)) error {
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })

	var file map[string]fileValue
	var path string
	if cf := fs.Lookup(configFlag); cf != nil {
		if !onCommandLine[configFlag] {
			if v, ok := lookupEnv(envName(configFlag)); ok {
				if err := cf.Value.Set(v); err != nil {
					return err
				}
			}
		}
		if path = cf.Value.String(); path != "" {
			var err error
			if file, err = readConfigFile(path, fs); err != nil {
				return err
			}
		}
	}

	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == configFlag || onCommandLine[f.Name] {
			return
		}
		if v, ok := lookupEnv(envName(f.Name)); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("environment %s=%q: %w", envName(f.Name), v, setError(f, err)))
			}
			return
		}
		if v, ok := file[f.Name]; ok {
			if err := fs.Set(f.Name, v.value); err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: %s: %q: %w", path, v.line, f.Name, v.value, setError(f, err)))
			}
		}
	})
	return errors.Join(errs...)
}

// setError says what a value should have looked like: the flag package
// reports only "parse error" for booleans, numbers and durations.
func setError(f *flag.Flag, err error) error {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return err
	}
	switch g.Get().(type) {
	case bool:
		return errors.New("want true or false")
	case time.Duration:
		return errors.New("want a duration such as 90s, 30m or 1h30m")
	case int, int64, uint, uint64:
		return errors.New("want a whole number")
	case float64:
		return errors.New("want a number")
	}
	return err
}

// fileValue is one key of the configuration file.
type fileValue struct {
	value string
	line  int
}

// readConfigFile reads a YAML mapping of flag names to scalar values. Keys
// are checked against fs; a key the file may not set, a nested value or a
// repeated key is an error naming the key and its line.
func readConfigFile(path string, fs *flag.FlagSet) (map[string]fileValue, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // empty or comments only
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s:%d: one YAML document only", path, more.Line)
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: want a mapping of settings (key: value), one per line", path, root.Line)
	}
	out := map[string]fileValue{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		name := k.Value
		if fs.Lookup(name) == nil || name == configFlag {
			return nil, fmt.Errorf("%s:%d: unknown key %q%s", path, k.Line, name, suggestKey(fs, name))
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s:%d: key %q is set twice", path, k.Line, name)
		}
		switch {
		case v.Kind == yaml.AliasNode && v.Alias != nil && v.Alias.Kind == yaml.ScalarNode:
			v = v.Alias
		case v.Kind != yaml.ScalarNode:
			return nil, fmt.Errorf("%s:%d: %s: want a single value, not a list or mapping", path, v.Line, name)
		}
		if v.Tag == "!!null" {
			return nil, fmt.Errorf("%s:%d: %s: no value (give one, or remove or comment out the line)", path, v.Line, name)
		}
		out[name] = fileValue{value: v.Value, line: v.Line}
	}
	return out, nil
}

// suggestKey names the flag a mistyped key probably meant (data_dir,
// DATA-DIR, --data-dir, CASTIRON_DATA_DIR).
func suggestKey(fs *flag.FlagSet, key string) string {
	k := strings.ToLower(strings.TrimLeft(key, "-"))
	k = strings.TrimPrefix(k, "castiron_")
	k = strings.ReplaceAll(k, "_", "-")
	if f := fs.Lookup(k); f != nil && k != configFlag {
		return fmt.Sprintf(" (did you mean %q?)", k)
	}
	return " (the keys are the names of the serve flags; `castiron config` prints them all)"
}

// writeConfig prints fs as a configuration file: every key with its help,
// the ones set (command line, environment or file) as active lines, the
// others commented out at their defaults. `castiron config` uses it, and
// `make deb` writes the packaged /etc/castiron/castiron.yaml with it.
func writeConfig(w io.Writer, fs *flag.FlagSet, set map[string]bool) error {
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name != configFlag {
			names = append(names, f.Name)
		}
	})
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("# castiron serve configuration (YAML). Keys are the flags of `castiron serve`;\n" +
		"# a flag on the command line wins over CASTIRON_<KEY> in the environment,\n" +
		"# which wins over this file. Commented-out lines show the defaults.\n")
	for _, name := range names {
		f := fs.Lookup(name)
		b.WriteString("\n")
		for _, line := range strings.Split(f.Usage, "\n") {
			b.WriteString("# " + line + "\n")
		}
		var v any = f.Value.String()
		if g, ok := f.Value.(flag.Getter); ok {
			if bv, ok := g.Get().(bool); ok {
				v = bv
			}
		}
		val, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		if set[name] {
			fmt.Fprintf(&b, "%s: %s", name, val)
		} else {
			fmt.Fprintf(&b, "#%s: %s", name, val)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// choiceValue is a string flag with a fixed set of values, so that a wrong
// one stops start-up naming its source (flag, variable or file line).
type choiceValue struct {
	p       *string
	allowed []string
}

func choice(fs *flag.FlagSet, p *string, name, def string, allowed []string, help string) {
	*p = def
	fs.Var(&choiceValue{p: p, allowed: allowed}, name, help+" ("+strings.Join(allowed, ", ")+")")
}

func (c *choiceValue) Set(s string) error {
	if !slices.Contains(c.allowed, s) {
		named := slices.DeleteFunc(slices.Clone(c.allowed), func(a string) bool { return a == "" }) // "": the default
		return fmt.Errorf("want one of %s", strings.Join(named, ", "))
	}
	*c.p = s
	return nil
}

func (c *choiceValue) String() string {
	if c == nil || c.p == nil {
		return ""
	}
	return *c.p
}
