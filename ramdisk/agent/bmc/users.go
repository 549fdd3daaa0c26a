package bmc

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
)

// Users are the user-management commands of the system interface.
type Users interface {
	// MaxUsers is Get User Access' maximum number of user IDs.
	MaxUsers(ctx context.Context, channel uint8) (uint8, error)
	UserName(ctx context.Context, id uint8) (string, error)
	SetUserName(ctx context.Context, id uint8, name string) error
	// SetPassword sets a 16-byte password (IPMI 1.5 and 2.0 alike).
	SetPassword(ctx context.Context, id uint8, password string) error
	EnableUser(ctx context.Context, id uint8) error
	// SetAccess gives the user IPMI messaging with privilege limit priv on
	// the channel.
	SetAccess(ctx context.Context, channel, id, priv uint8) error
}

// PrivAdmin is the ADMINISTRATOR privilege level.
const PrivAdmin = 4

// Credentials of the user EnsureUser set up. Password is a secret: it is
// never logged.
type Credentials struct {
	UserID   uint8
	Username string
	Password string
	Channel  uint8
}

// passwordAlphabet avoids characters shells, URLs and BMC web UIs quote.
const passwordAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789"

// NewPassword is a 16-character random password (the IPMI 1.5 limit; 2.0
// BMCs take it too), about 93 bits.
func NewPassword() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	for i := range b {
		b[i] = passwordAlphabet[int(b[i])%len(passwordAlphabet)]
	}
	return string(b), nil
}

// EnsureUser creates the user name on the BMC, or resets it when it
// exists: a new password, enabled, with administrator privilege over IPMI
// on the LAN channel. User 1 (the anonymous user) is never touched.
func EnsureUser(ctx context.Context, c Users, channel uint8, name string) (Credentials, error) {
	if name == "" || len(name) > 16 {
		return Credentials{}, fmt.Errorf("bmc user %q: a name of 1-16 characters", name)
	}
	if channel == 0 {
		return Credentials{}, errors.New("bmc user: the BMC has no LAN channel")
	}
	max, err := c.MaxUsers(ctx, channel)
	if err != nil {
		return Credentials{}, fmt.Errorf("bmc user: get user access: %w", err)
	}
	var id, free uint8
	for u := uint8(2); u <= max && u != 0; u++ {
		n, err := c.UserName(ctx, u)
		if err != nil {
			continue
		}
		if n == name {
			id = u
			break
		}
		if n == "" && free == 0 {
			free = u
		}
	}
	if id == 0 {
		if free == 0 {
			return Credentials{}, fmt.Errorf("bmc user: all %d user slots are taken", max)
		}
		id = free
		if err := c.SetUserName(ctx, id, name); err != nil {
			return Credentials{}, fmt.Errorf("bmc user: set user name of user %d: %w", id, err)
		}
	}
	pw, err := NewPassword()
	if err != nil {
		return Credentials{}, err
	}
	if err := c.SetPassword(ctx, id, pw); err != nil {
		return Credentials{}, fmt.Errorf("bmc user: set password of user %d: %w", id, err)
	}
	if err := c.SetAccess(ctx, channel, id, PrivAdmin); err != nil {
		return Credentials{}, fmt.Errorf("bmc user: set access of user %d on channel %d: %w", id, channel, err)
	}
	if err := c.EnableUser(ctx, id); err != nil {
		return Credentials{}, fmt.Errorf("bmc user: enable user %d: %w", id, err)
	}
	return Credentials{UserID: id, Username: name, Password: pw, Channel: channel}, nil
}
