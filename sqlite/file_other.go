//go:build !unix

package sqlite

import "os"

// fileID is a file's identity; without inodes, only its existence is
// checked.
type fileID struct{ dev, ino uint64 }

// statID returns the identity of the file path names now.
func statID(path string) (fileID, error) {
	_, err := os.Stat(path)
	return fileID{}, err
}
