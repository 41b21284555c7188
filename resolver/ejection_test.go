package resolver_test

// The ejection tests need grpc-go's outlier detection registered, as a
// program that wants ejection does.
import _ "github.com/switchboard-io/switchboard/resolver/ejection"
