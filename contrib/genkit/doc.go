// Package genkit records Genkit agents.
package genkit
