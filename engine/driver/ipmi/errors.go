package ipmi

import (
	"context"

	"castiron/engine/driver"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"
)

// Sentinels callers may test with errors.Is; every error also carries the
// BMC's own words.
var (
	// ErrAuthentication means the BMC refused the credentials (user name,
	// password or privilege level).
	ErrAuthentication = errors.New("IPMI authentication failed")
	// ErrPowerTimeout means the node did not reach the requested power state
	// in time.
	ErrPowerTimeout = driver.ErrPowerTimeout
)

// bmcError is a failed BMC exchange: a one-line message for operators that
// still unwraps to the causes (go-ipmi's error, ctx.Err(), a sentinel).
type bmcError struct {
	msg    string
	causes []error
}

func (e *bmcError) Error() string   { return e.msg }
func (e *bmcError) Unwrap() []error { return e.causes }

// wrapBMC describes err for operators: what was attempted, on which node and
// BMC, and what the BMC (or the network) said. go-ipmi's messages span
// several lines; they are folded into one.
func wrapBMC(ctx context.Context, inf *info, err error, format string, args ...any) error {
	causes := []error{err}
	if cerr := ctxErr(ctx); cerr != nil && !errors.Is(err, cerr) {
		// go-ipmi joins per-suite errors with %v, losing the context error.
		causes = append(causes, cerr)
	}
	what := fmt.Sprintf(format, args...)
	return &bmcError{
		msg:    fmt.Sprintf("%s for node %s (BMC %s): %s", what, inf.uuid, inf.target(), oneLine(err)),
		causes: causes,
	}
}

// authError is wrapBMC for a refused login, with the hint an operator needs.
func authError(inf *info, err error, note string) error {
	return &bmcError{
		msg: fmt.Sprintf("IPMI authentication failed for node %s (BMC %s, user %q): check ipmi_username, ipmi_password and ipmi_priv_level%s: %s",
			inf.uuid, inf.target(), inf.username, note, oneLine(err)),
		causes: []error{ErrAuthentication, err},
	}
}

// ctxErr is ctx.Err(), but also reports a deadline that has passed before
// ctx's timer fired: go-ipmi sets the socket read deadline to ctx's, so the
// read often times out a moment before ctx is marked done.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// go-ipmi v0.9.1 reports session setup failures as text: Connect20 joins the
// per-suite errors with %v, so errors.Is cannot see through them. These
// fragments are its wording (pinned version; covered by tests against
// ipmi_sim).
var authFragments = []string{
	"RAKP authentication failed",                     // client.ErrRAKPAuthentication: wrong password
	"Unauthorized name",                              // RMCP+ status 0x0d: unknown user
	"Invalid integrity check value",                  // RMCP+ status 0x0f: BMC saw a wrong password
	"Unauthorized role of privilege level requested", // RMCP+ status 0x0a
	"anonymous login is not enabled",                 // empty user name
	"SetSessionPrivilegeLevel to",                    // ipmi_priv_level above the user's limit
}

// noAnswer is go-ipmi's wording for an exchange that got no answer.
const noAnswer = "no matching IPMI response"

// rakp4Mismatch is go-ipmi's wording for a RAKP 4 whose integrity check
// value is not the one the client derived. The password is right by then
// (RAKP 2, keyed with it, matched, and the BMC took RAKP 3): the two ends
// derived different session keys. go-ipmi takes the first datagram as the
// answer to each session setup message, so an answer that came late, after
// the request was sent again, shifts every answer after it by one: the
// answer read as RAKP 4 is the repeat's RAKP 2.
const rakp4Mismatch = "RAKP4 integrity check value does not match"

// shiftedAnswers reports a session setup that failed on an answer out of
// step (rakp4Mismatch), which a new session (a fresh socket) does not have.
func shiftedAnswers(err error) bool {
	return strings.Contains(err.Error(), rakp4Mismatch)
}

// isAuthFailure reports whether a Connect error means the BMC refused the
// credentials (as opposed to the network or the cipher suite failing).
func isAuthFailure(err error) bool {
	s := err.Error()
	if strings.Contains(s, noAnswer) || strings.Contains(s, rakp4Mismatch) {
		// A lost answer (Set Session Privilege Level's, say, on a lossy
		// link) is the network's failure: calling it a refused login
		// sent operators to their credentials and stopped the power
		// wait's retries. A RAKP 4 out of step comes after the password
		// was found right (rakp4Mismatch).
		return false
	}
	for _, f := range authFragments {
		if strings.Contains(s, f) {
			return true
		}
	}
	return false
}

// suiteFailure reports whether a lanplus Connect error happened while
// negotiating the session with one cipher suite (Open Session, RAKP 1-4),
// which is worth retrying with another suite. go-ipmi tags exactly those
// errors "failed with cipher suite id".
func suiteFailure(err error) bool {
	return strings.Contains(err.Error(), "failed with cipher suite id")
}

// unreachable reports errors no other cipher suite can fix: nothing listens
// (ICMP port unreachable on a connected UDP socket) or the caller gave up.
func unreachable(ctx context.Context, err error) bool {
	return ctxErr(ctx) != nil || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH)
}

// isActivateTimeout reports an IPMI 1.5 Activate Session that got no reply:
// BMCs (ipmi_sim among them) silently drop a request signed with a wrong
// password, so that is what a bad password looks like on IPMI 1.5.
func isActivateTimeout(err error) bool {
	s := err.Error()
	return strings.Contains(s, "ActivateSession failed") &&
		(strings.Contains(s, "no matching IPMI response") || strings.Contains(s, "timed out"))
}
