package pool

import (
	"log/slog"
	"slices"
	"time"
)

// ejectionDefaults fills the zero fields of e and corrects impossible
// values with a warning.
func ejectionDefaults(e Ejection, log *slog.Logger) Ejection {
	if e.Failures == 0 {
		e.Failures = DefaultEjectionFailures
	}
	if e.BaseTime < 0 {
		log.Warn("address pool: negative Ejection.BaseTime; using the default", "base_time", e.BaseTime, "default", DefaultEjectionBaseTime)
		e.BaseTime = 0
	}
	if e.BaseTime == 0 {
		e.BaseTime = DefaultEjectionBaseTime
	}
	if e.MaxTime < 0 {
		log.Warn("address pool: negative Ejection.MaxTime; using the default", "max_time", e.MaxTime, "default", DefaultEjectionMaxTime)
		e.MaxTime = 0
	}
	if e.MaxTime == 0 {
		e.MaxTime = DefaultEjectionMaxTime
	}
	e.MaxTime = max(e.MaxTime, e.BaseTime)
	switch {
	case e.MaxPercent == 0:
		e.MaxPercent = DefaultEjectionMaxPercent
	case e.MaxPercent < 0 || e.MaxPercent > 100:
		log.Warn("address pool: Ejection.MaxPercent out of 1..100; using the default", "max_percent", e.MaxPercent, "default", DefaultEjectionMaxPercent)
		e.MaxPercent = DefaultEjectionMaxPercent
	}
	return e
}

// isEjected reports whether the address is ejected now; an address whose
// ejection time is up returns (on the first look after it).
func (c *conn) isEjected() bool {
	if !c.ejected.Load() {
		return false
	}
	if time.Now().UnixNano() < c.until.Load() {
		return true
	}
	if c.ejected.CompareAndSwap(true, false) {
		c.log.Info("address pool: ejected address returns", "module", c.module, "addr", c.addr)
	}
	return false
}

// answered records a send the remote side answered: the transport works,
// the count of consecutive failures starts again.
func (c *conn) answered() {
	if c.fails.Load() != 0 {
		c.fails.Store(0)
	}
}

// transportFailed records a transport failure on c (a send without an
// answer, or a failed connection attempt) and ejects the address at every
// Ejection.Failures-th in a row, when the modules using it allow it.
// Failures of an ejected address (sends that had nowhere else to go) are
// not counted.
func (p *Pool) transportFailed(c *conn) {
	if p.eject.Failures < 0 || c.isEjected() {
		return
	}
	n := int(c.fails.Add(1))
	if n%p.eject.Failures != 0 {
		return
	}
	p.ejectMu.Lock()
	defer p.ejectMu.Unlock()
	if c.isEjected() {
		return
	}
	// Never more than MaxPercent of any module's addresses at once.
	for module, rt := range *p.routes.Load() {
		if !slices.Contains(rt.addrs, c) {
			continue
		}
		ejected := 0
		for _, o := range rt.addrs {
			if o.isEjected() {
				ejected++
			}
		}
		if (ejected+1)*100 > p.eject.MaxPercent*len(rt.addrs) {
			p.log.Debug("address pool: not ejecting an address: too many of the module's addresses are ejected",
				"addr", c.addr, "module", module, "failures", n, "ejected", ejected, "addresses", len(rt.addrs), "max_percent", p.eject.MaxPercent)
			return
		}
	}
	now := time.Now()
	// The ejections in a row: one less for each BaseTime spent back in
	// rotation since the last one ended.
	k := c.ejections
	if c.lastUntil != 0 {
		if back := now.UnixNano() - c.lastUntil; back > 0 {
			k -= int(back / int64(p.eject.BaseTime))
		}
	}
	k = min(max(k, 0)+1, int(p.eject.MaxTime/p.eject.BaseTime)+1)
	d := min(time.Duration(k)*p.eject.BaseTime, p.eject.MaxTime)
	c.ejections = k
	c.lastUntil = now.Add(d).UnixNano()
	c.until.Store(c.lastUntil)
	c.ejected.Store(true)
	c.fails.Store(0)
	p.log.Warn("address pool: ejecting an address after consecutive transport failures",
		"module", c.module, "addr", c.addr, "failures", n, "for", d, "ejections_in_a_row", k)
}
