// Package docs holds the user guides (Markdown) and their tests: every
// relative link in README.md and docs/ resolves, every command in a `sh`
// block of the README's tour and of getting-started.md runs, and every
// benchmark command of performance.md names a benchmark that exists.
package docs
