// Package conf holds Spindle's configuration: plain structs with their
// defaults (Default), the ps-lite environment contract (FromEnv, the only
// place DMLC_* and PS_* variables are read, through an injected Lookup),
// and validation (Validate, which reports every problem at once and
// changes nothing).
//
// # Usage
//
//	c, err := conf.FromEnv(conf.Default(), os.LookupEnv)
//	if err == nil {
//		err = c.Validate()
//	}
//
// Launchers go the other way with PS.Environ, which renders the contract
// for a child process. Only the standard library is imported here.
package conf
