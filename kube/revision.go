package kube

import "strconv"

// revisionOf is the catalog revision of an object whose
// metadata.resourceVersion is rv: rv itself when it is a plain positive
// decimal (as the API server's etcd storage writes it: etcd's revision of
// the object's last write, which grows with every write in the cluster),
// 0 (unknown) otherwise. A resourceVersion is formally opaque; a server
// whose versions are not such numbers gives every instance Revision 0,
// and Watch then takes states as they come, as before revisions existed.
func revisionOf(rv string) int64 {
	if rv == "" || len(rv) > 19 || rv[0] == '0' {
		return 0
	}
	for i := 0; i < len(rv); i++ {
		if rv[i] < '0' || rv[i] > '9' {
			return 0
		}
	}
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		return 0
	}
	return n
}
