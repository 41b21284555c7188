package switchboard

import (
	"context"
	"errors"
)

// ErrPositionGone is WatchFrom's answer when the catalog's history no
// longer reaches back to the position (its change log was trimmed past it,
// or the catalog was re-created or restored since): watch afresh.
var ErrPositionGone = errors.New("watch position no longer in the catalog's history")

// WatchResumer is implemented by catalogs whose watches can resume where an
// earlier watch left off (both SQL backends), as etcd's watch resumes from
// a revision. A watch's events carry Event.Position where it is a valid
// point to resume from.
type WatchResumer interface {
	// WatchFrom is Watch resumed from position, an Event.Position an earlier
	// watch of this catalog (in any process) delivered. Instead of the
	// current set, the watcher first gets one event per instance the
	// catalog changed after position: EventUpdated with its state now when
	// q selects it (the watcher may not have known it: treat an update of
	// an unknown instance as an addition), EventRemoved with the reason
	// the change log recorded when it is gone (its Instance holds only
	// the ID when the log does not say more), or with the reason Watch
	// would give when it no longer matches q. Then EventSynced, then
	// changes as Watch. A change the earlier watch delivered may come
	// again; its Revision tells. ErrPositionGone when the catalog's history
	// no longer reaches back to position.
	WatchFrom(ctx context.Context, q Query, position string) (<-chan Event, error)
}
