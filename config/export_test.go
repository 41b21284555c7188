package config

// ReadTokensFile is readTokensFile, for the fuzz test.
var ReadTokensFile = readTokensFile
