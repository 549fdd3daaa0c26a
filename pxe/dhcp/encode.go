package dhcp

import (
	"encoding/binary"
	"net"
	"slices"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// Option codes the wire format places specially (RFC 2132, RFC 3046).
const (
	codePad       = 0
	codeAgentInfo = 82 // RFC 3046 2.1: the relay agent option comes last
	codeEnd       = 255
	bootpMinLen   = 300 // RFC 951: shorter messages are dropped by some relays
)

// appendPacket appends d in wire format to dst: byte for byte what
// d.ToBytes() writes (the tests compare them), without its buffer growth,
// sorted-key slice and padding slice, so a busy loop encodes its answers
// into one reused buffer.
func appendPacket(dst []byte, d *dhcpv4.DHCPv4) []byte {
	start := len(dst)
	dst = append(dst, byte(d.OpCode), byte(d.HWType), byte(len(d.ClientHWAddr)), d.HopCount)
	dst = append(dst, d.TransactionID[:]...)
	dst = binary.BigEndian.AppendUint16(dst, d.NumSeconds)
	dst = binary.BigEndian.AppendUint16(dst, d.Flags)
	dst = appendIP(dst, d.ClientIPAddr)
	dst = appendIP(dst, d.YourIPAddr)
	dst = appendIP(dst, d.ServerIPAddr)
	dst = appendIP(dst, d.GatewayIPAddr)
	dst = appendPadded(dst, d.ClientHWAddr, 16, 16)
	dst = appendPadded(dst, []byte(d.ServerHostName), 63, 64)
	dst = appendPadded(dst, []byte(d.BootFileName), 127, 128)
	dst = append(dst, 99, 130, 83, 99) // magic cookie

	var codes [256]uint8
	keys := codes[:0]
	agentInfo := false
	for c := range d.Options {
		switch c {
		case codeAgentInfo:
			agentInfo = true
		case codeEnd, codePad:
		default:
			keys = append(keys, c)
		}
	}
	slices.Sort(keys)
	if agentInfo {
		keys = append(keys, codeAgentInfo)
	}
	for _, c := range keys {
		data := d.Options[c]
		if len(data) == 0 {
			dst = append(dst, c, 0)
			continue
		}
		for len(data) > 0 { // RFC 3396: long values span several options
			n := min(len(data), 255)
			dst = append(dst, c, byte(n))
			dst = append(dst, data[:n]...)
			data = data[n:]
		}
	}
	dst = append(dst, codeEnd)
	for len(dst)-start < bootpMinLen {
		dst = append(dst, codePad)
	}
	return dst
}

// appendIP appends ip's four bytes, zeros for none.
func appendIP(dst []byte, ip net.IP) []byte {
	if v4 := ip.To4(); v4 != nil {
		return append(dst, v4...)
	}
	return append(dst, 0, 0, 0, 0)
}

// appendPadded appends the first max bytes of b, then zeros up to size.
func appendPadded(dst, b []byte, max, size int) []byte {
	n := min(len(b), max)
	dst = append(dst, b[:n]...)
	for range size - n {
		dst = append(dst, 0)
	}
	return dst
}
