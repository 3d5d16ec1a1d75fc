// Package lab runs the performance lab: the reports' staged method
// with noise-aware keep rules, a simulator-guided joint search beyond the
// greedy pass, and resumable trial scheduling over engines, bench and store.
// The spec it runs is package labspec's.
package lab
