package inspectrules

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"castiron/fault/pyrepr"
)

// maxRetries bounds api-call's retries (and so the time a rule can hold
// an inspection).
const maxRetries = 10

// retryStatus are the answers api-call retries (urllib3's status_forcelist
// in Ironic's action).
var retryStatus = map[int]bool{429: true, 500: true, 502: true, 503: true, 504: true}

// apiCall is the api-call action: an HTTP GET of url, retried on errors
// and on 429/5xx with exponential backoff; any 4xx/5xx at the end fails
// the rule.
func (ev *evaluator) apiCall(args map[string]any) error {
	rawURL := pyStr(args["url"])
	timeout, err := pyFloatArg(args, "timeout", 5)
	if err == nil && timeout <= 0 {
		err = fmt.Errorf("timeout must be greater than zero")
	}
	var retries int
	if err == nil {
		retries, err = pyIntArg(args, "retries", 3)
	}
	var backoff float64
	if err == nil {
		backoff, err = pyFloatArg(args, "backoff_factor", 0.3)
	}
	if err != nil {
		return actionFailure("Invalid parameter: " + err.Error())
	}
	client := &http.Client{Timeout: time.Duration(timeout * float64(time.Second))}
	base := http.DefaultTransport.(*http.Transport).Clone()
	if ev.opts.HTTP != nil && ev.opts.HTTP.Transport != nil {
		client.Transport = ev.opts.HTTP.Transport
	} else {
		client.Transport = base
	}
	if proxies, ok := unwrap(args["proxies"]).(map[string]any); ok && len(proxies) > 0 {
		base.Proxy = func(r *http.Request) (*url.URL, error) {
			p, ok := proxies[r.URL.Scheme].(string)
			if !ok || p == "" {
				return nil, nil
			}
			return url.Parse(p)
		}
		client.Transport = base
	}
	fail := func(e error) error {
		return actionFailure(fmt.Sprintf("Request to %s failed: %s", rawURL, e))
	}
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ev.ctx, http.MethodGet, rawURL, nil)
		if err != nil {
			return fail(err)
		}
		if headers, ok := unwrap(args["headers"]).(map[string]any); ok {
			for k, v := range headers {
				req.Header.Set(k, pyStr(v))
			}
		}
		resp, err := client.Do(req)
		status := 0
		if err == nil {
			status = resp.StatusCode
			resp.Body.Close()
		}
		retry := err != nil || retryStatus[status]
		if !retry || attempt >= retries {
			switch {
			case err != nil:
				return fail(err)
			case status >= 400:
				return fail(fmt.Errorf("%d %s for url: %s", status, http.StatusText(status), rawURL))
			}
			return nil
		}
		// urllib3: backoff_factor * 2**(retry-1), none before the first retry.
		if attempt > 0 {
			d := time.Duration(backoff * math.Pow(2, float64(attempt-1)) * float64(time.Second))
			if err := sleep(ev.ctx, d); err != nil {
				return fail(err)
			}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// pyFloatArg is float(args[name]) with a default.
func pyFloatArg(args map[string]any, name string, def float64) (float64, error) {
	v, has := args[name]
	if !has || v == nil {
		return def, nil
	}
	if n, ok := numberOf(v); ok {
		return n.float(), nil
	}
	if s, ok := v.(string); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return 0, fmt.Errorf("could not convert string to float: %s", pyrepr.Quote(s))
		}
		return f, nil
	}
	return 0, fmt.Errorf("float() argument must be a string or a real number, not '%s'", pyTypeName(v))
}

// pyIntArg is int(args[name]) with a default.
func pyIntArg(args map[string]any, name string, def int) (int, error) {
	v, has := args[name]
	if !has || v == nil {
		return def, nil
	}
	if n, ok := numberOf(v); ok {
		if n.isFloat {
			return int(min(n.f, maxRetries)), nil
		}
		if n.i.IsInt64() {
			return int(min(n.i.Int64(), maxRetries)), nil
		}
		return maxRetries, nil
	}
	if s, ok := v.(string); ok {
		i, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return 0, fmt.Errorf("invalid literal for int() with base 10: %s", pyrepr.Quote(s))
		}
		return min(i, maxRetries), nil
	}
	return 0, fmt.Errorf("int() argument must be a string, a bytes-like object or a real number, not '%s'", pyTypeName(v))
}
