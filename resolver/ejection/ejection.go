// Package ejection turns on outlier ejection for clients of the
// switchboard resolver: importing it for its side effect registers
// grpc-go's outlier_detection_experimental balancer, which the resolver's
// service config (resolver.ServiceConfig, resolver.RoundRobin) wraps
// around its weighted policy. grpc-go registers that balancer only in its
// xds package, which adds several modules and about 25 MB to a binary, so
// only programs that want ejection pay for it:
//
//	import _ "github.com/switchboard-io/switchboard/resolver/ejection"
//
// Without it the same config falls back to the weighted policy alone:
// weights, zones and drain still apply; addresses failing at the
// transport are not ejected.
package ejection

import _ "google.golang.org/grpc/xds" // registers outlier_detection_experimental
