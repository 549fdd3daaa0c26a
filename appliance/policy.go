package appliance

import (
	"fmt"
	"os"

	"castiron/httpapi/policy"
)

// Policy is `castiron policy list [serve flags]`: the effective rules
// (Ironic's defaults overridden by --policy-file, from the flag, the
// environment or the configuration file, as serve reads it) in the policy
// file's format, each with its description and scopes.
func Policy(args []string) error {
	if len(args) == 0 || args[0] != "list" {
		return fmt.Errorf("usage: castiron policy list [--policy-file FILE | --config FILE]")
	}
	fs, c := serveFlags()
	if err := resolveFlags(fs, args[1:], os.LookupEnv); err != nil {
		return err
	}
	e, err := policy.Load(c.access.policyFile)
	if err != nil {
		return err
	}
	_, err = fmt.Print(e.Format())
	return err
}
