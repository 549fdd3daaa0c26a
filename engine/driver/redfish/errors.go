package redfish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"

	"castiron/engine/driver"

	"github.com/stmcginnis/gofish/schemas"
)

// Sentinels callers may test with errors.Is; every error also carries the
// BMC's own words.
var (
	// ErrAuthentication means the BMC refused the credentials (401/403).
	ErrAuthentication = errors.New("Redfish authentication failed")
	// ErrNotFound means a resource the node's driver_info names (its
	// system) does not exist on the BMC.
	ErrNotFound = errors.New("Redfish resource not found")
	// ErrUntrusted means the BMC's TLS certificate failed verification.
	ErrUntrusted = errors.New("Redfish BMC certificate not trusted")
	// ErrUnreachable means no answer at all: refused, unroutable, timed out.
	ErrUnreachable = errors.New("Redfish BMC unreachable")
	// ErrPowerTimeout means the node did not reach the requested power
	// state in time.
	ErrPowerTimeout = driver.ErrPowerTimeout
)

// bmcError is a failed BMC exchange: one line for operators that still
// unwraps to its causes (a sentinel, gofish's *schemas.Error, ctx.Err()).
type bmcError struct {
	msg    string
	causes []error
}

func (e *bmcError) Error() string   { return e.msg }
func (e *bmcError) Unwrap() []error { return e.causes }

// statusError describes a non-2xx answer: what was asked, the status and
// the BMC's own message (Redfish error body, extended info first).
func (e *endpoint) statusError(method, path string, resp *http.Response, body []byte) error {
	rf := schemas.ConstructError(resp.StatusCode, body)
	what := fmt.Sprintf("Redfish BMC %s answered %s %s with HTTP %d", e.address, method, path, resp.StatusCode)
	if m := bmcMessage(body); m != "" {
		what += ": " + m
	}
	causes := []error{rf}
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		causes = append(causes, ErrAuthentication)
		what = fmt.Sprintf("%s (user %q: check redfish_username and redfish_password)", what, e.user)
	case http.StatusNotFound:
		causes = append(causes, ErrNotFound)
	}
	return &bmcError{msg: what, causes: causes}
}

// bmcMessage extracts the human part of a Redfish error body, or a short
// excerpt of a body that is not one.
func bmcMessage(body []byte) string {
	var rf struct {
		Error struct {
			Code     string `json:"code"`
			Message  string `json:"message"`
			Extended []struct {
				MessageID string `json:"MessageId"`
				Message   string `json:"Message"`
			} `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &rf) == nil && (rf.Error.Message != "" || len(rf.Error.Extended) > 0) {
		var parts []string
		for _, x := range rf.Error.Extended {
			if x.Message != "" {
				parts = append(parts, fmt.Sprintf("%s (%s)", x.Message, x.MessageID))
			}
		}
		if len(parts) == 0 {
			parts = append(parts, rf.Error.Message)
		}
		return strings.Join(parts, "; ")
	}
	s := strings.Join(strings.Fields(string(body)), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// transportError describes a request that got no HTTP answer.
func (e *endpoint) transportError(ctx context.Context, method, path string, err error) error {
	causes := []error{err}
	var why string
	switch {
	case isTLSTrust(err):
		causes = append(causes, ErrUntrusted)
		why = fmt.Sprintf("its TLS certificate is not trusted (set redfish_verify_ca to the CA bundle path, or false): %v", err)
	case ctx.Err() != nil:
		causes = append(causes, ctx.Err())
		why = fmt.Sprintf("gave up: %v", ctx.Err())
	case strings.Contains(err.Error(), "TLS handshake timeout"):
		causes = append(causes, ErrUnreachable)
		why = fmt.Sprintf("no TLS handshake within %s", e.cfg.ConnectTimeout)
	case isDialTimeout(err):
		causes = append(causes, ErrUnreachable)
		why = fmt.Sprintf("could not connect within %s", e.cfg.ConnectTimeout)
	case isTimeout(err):
		causes = append(causes, ErrUnreachable)
		why = fmt.Sprintf("no answer within %s", e.cfg.RequestTimeout)
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH), isDNS(err):
		causes = append(causes, ErrUnreachable)
		why = fmt.Sprintf("unreachable: %v", err)
	default:
		why = err.Error()
	}
	return &bmcError{msg: fmt.Sprintf("Redfish BMC %s: %s %s failed: %s", e.address, method, path, why), causes: causes}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func isDialTimeout(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial" && oe.Timeout()
}

func isDNS(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de)
}

// opError prefixes what the driver was doing. The node is not named: the
// engine's message around it does, and the BMC's address is in err.
func opError(_ *info, err error, format string, args ...any) error {
	return &bmcError{
		msg:    fmt.Sprintf("%s: %v", fmt.Sprintf(format, args...), err),
		causes: []error{err},
	}
}
