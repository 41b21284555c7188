package httpapi

// HistorySize returns the bytes the server's watch history counts for its
// entries and how many it holds, for tests.
func HistorySize(s *Server) (bytes int64, entries int) { return s.feed.historyBytes() }

// OwnerTag returns the credential tag a stored secret hash carries, for
// tests.
func OwnerTag(stored string) string { return secretTag(stored) }
