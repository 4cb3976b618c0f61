package cli

import (
	"net"
	"sync"
	"time"

	"charm.land/ssh"
)

// A connection to the SSH console costs the server a goroutine and a
// handshake's state before it proves it holds a key. Like OpenSSH's
// LoginGraceTime and MaxStartups, a connection has sshLoginGrace to
// finish its handshake and authentication, and at most sshMaxPreAuth
// connections may be at that stage at once: one more is closed as soon
// as it is accepted. A connection leaves the count when it opens its
// session or closes.
const (
	sshLoginGrace = 30 * time.Second
	sshMaxPreAuth = 64
)

// preAuthKey holds, in a connection's context, the function that takes
// it out of the pre-authentication count.
type preAuthKey struct{}

// sshGate counts the connections that have not yet opened a session.
type sshGate struct {
	slots chan struct{}
}

func newSSHGate(max int) *sshGate {
	if max <= 0 {
		max = sshMaxPreAuth
	}
	return &sshGate{slots: make(chan struct{}, max)}
}

// admit is the server's ConnCallback: it takes a slot for c, or refuses c
// (nil closes it) when every slot is taken.
func (g *sshGate) admit(ctx ssh.Context, c net.Conn) net.Conn {
	select {
	case g.slots <- struct{}{}:
	default:
		return nil
	}
	gc := &gatedConn{Conn: c}
	gc.release = sync.OnceFunc(func() { <-g.slots })
	ctx.SetValue(preAuthKey{}, gc.release)
	return gc
}

// authenticated gives back the slot of the connection ctx belongs to.
func authenticated(ctx ssh.Context) {
	if release, ok := ctx.Value(preAuthKey{}).(func()); ok {
		release()
	}
}

// gatedConn gives back its slot when it closes, if its session has not.
type gatedConn struct {
	net.Conn
	release func()
}

func (c *gatedConn) Close() error {
	c.release()
	return c.Conn.Close()
}
