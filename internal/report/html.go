package report

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// WriteHTML writes a self-contained HTML version of the report. It is the
// Markdown report converted, not a second template, so both always carry
// the same sections, tables, repeats, noise bands and warnings; the charts
// (written by WriteCharts into chartDir) that the Markdown links as PNGs are
// inlined as SVG, so the file can be mailed or opened anywhere without its
// directory.
func WriteHTML(w io.Writer, r *Report, chartDir string) error {
	svgs := make(map[string]string, len(r.Charts))
	for _, c := range r.Charts {
		b, err := os.ReadFile(filepath.Join(chartDir, c.SVG))
		if err != nil {
			return fmt.Errorf("report: inline chart %s: %w", c.SVG, err)
		}
		svg := string(b)
		if i := strings.Index(svg, "<svg"); i > 0 {
			svg = svg[i:] // drop the XML prolog, invalid inside HTML
		}
		svgs[c.PNG] = svg
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, r); err != nil {
		return fmt.Errorf("report: html: %w", err)
	}
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>` + html.EscapeString(r.Title) + `</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.7em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:1em 0;width:100%}th,td{border:1px solid #ccc;padding:.35em .6em;text-align:left;vertical-align:top}
th{background:#f4f6f8}td,th{overflow-wrap:anywhere}pre{background:#f6f8fa;padding:.8em;overflow-x:auto;font-size:.85em;max-width:100%;box-sizing:border-box}
code{background:#f6f8fa;padding:0 .2em}.up{background:#c7f0c2}.down{background:#f6c8c8}
.chart svg,img{max-width:100%;height:auto}
</style></head><body>
`)
	if err := markdownToHTML(&b, md.String(), svgs); err != nil {
		return fmt.Errorf("report: html: %w", err)
	}
	b.WriteString("</body></html>\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("report: html: %w", err)
	}
	return nil
}

var (
	imageRe   = regexp.MustCompile(`^!\[([^\]]*)\]\(([^)]*)\)$`)
	orderedRe = regexp.MustCompile(`^\d+\. `)
	bulletRe  = regexp.MustCompile(`^- `)
	headingMD = regexp.MustCompile(`^(#{1,6}) (.*)$`)
)

// markdownToHTML converts the Markdown WriteMarkdown writes: ATX headings,
// fenced code, pipe tables, "- " and "1. " lists, image lines (charts) and
// paragraphs, with **bold**, `code` and <br> inline. It is not a general
// Markdown renderer; an unknown construct falls through as a paragraph, so
// nothing the Markdown says is dropped.
func markdownToHTML(b *strings.Builder, md string, svgs map[string]string) error {
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); {
		line := lines[i]
		switch {
		case strings.TrimSpace(line) == "":
			i++
		case strings.HasPrefix(line, "```"):
			lang := strings.TrimPrefix(line, "```")
			j := i + 1
			for j < len(lines) && !strings.HasPrefix(lines[j], "```") {
				j++
			}
			if j == len(lines) {
				return fmt.Errorf("unclosed code fence at line %d", i+1)
			}
			class := ""
			if lang != "" {
				class = ` class="language-` + html.EscapeString(lang) + `"`
			}
			fmt.Fprintf(b, "<pre><code%s>%s</code></pre>\n", class, html.EscapeString(strings.Join(lines[i+1:j], "\n")))
			i = j + 1
		case headingMD.MatchString(line):
			m := headingMD.FindStringSubmatch(line)
			n := len(m[1])
			fmt.Fprintf(b, "<h%d id=\"%s\">%s</h%d>\n", n, anchor(m[2]), inline(m[2]), n)
			i++
		case strings.HasPrefix(line, "|"):
			j := i
			for j < len(lines) && strings.HasPrefix(lines[j], "|") {
				j++
			}
			writeTable(b, lines[i:j])
			i = j
		case imageRe.MatchString(line):
			m := imageRe.FindStringSubmatch(line)
			if svg, ok := svgs[m[2]]; ok {
				// The chart draws its own title; the attribute keeps the
				// Markdown's alt text.
				fmt.Fprintf(b, "<figure class=\"chart\" title=\"%s\">%s</figure>\n", html.EscapeString(m[1]), svg)
			} else {
				fmt.Fprintf(b, "<p><img alt=\"%s\" src=\"%s\"></p>\n", html.EscapeString(m[1]), html.EscapeString(m[2]))
			}
			i++
		case strings.HasPrefix(line, "- ") || orderedRe.MatchString(line):
			tag, re := "ul", bulletRe
			if orderedRe.MatchString(line) {
				tag, re = "ol", orderedRe
			}
			b.WriteString("<" + tag + ">\n")
			for i < len(lines) && re.MatchString(lines[i]) {
				b.WriteString("<li>" + inline(re.ReplaceAllString(lines[i], "")) + "</li>\n")
				i++
			}
			b.WriteString("</" + tag + ">\n")
		default:
			j := i
			for j < len(lines) && strings.TrimSpace(lines[j]) != "" && !startsBlock(lines[j]) {
				j++
			}
			if j == i {
				j++ // a line startsBlock claims but its case did not take
			}
			parts := make([]string, j-i)
			for k := range parts {
				parts[k] = inline(lines[i+k])
			}
			b.WriteString("<p>" + strings.Join(parts, "\n") + "</p>\n")
			i = j
		}
	}
	return nil
}

func startsBlock(line string) bool {
	return strings.HasPrefix(line, "```") || strings.HasPrefix(line, "|") || headingMD.MatchString(line) ||
		imageRe.MatchString(line) || strings.HasPrefix(line, "- ") || orderedRe.MatchString(line)
}

// writeTable renders a pipe table: header, the |---| separator, rows.
func writeTable(b *strings.Builder, rows []string) {
	b.WriteString("<table>\n")
	for k, row := range rows {
		cells := tableCells(row)
		if k == 1 && isSeparator(cells) {
			continue
		}
		tag := "td"
		if k == 0 {
			tag = "th"
		}
		b.WriteString("<tr>")
		for _, c := range cells {
			b.WriteString("<" + tag + ">" + inline(c) + "</" + tag + ">")
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table>\n")
}

// tableCells splits "| a | b \| c |" into its cells, unescaping "\|".
func tableCells(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimPrefix(row, "|")
	if strings.HasSuffix(row, "|") && !strings.HasSuffix(row, `\|`) {
		row = row[:len(row)-1]
	}
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(row); i++ {
		switch {
		case row[i] == '\\' && i+1 < len(row) && row[i+1] == '|':
			cur.WriteByte('|')
			i++
		case row[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(row[i])
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

func isSeparator(cells []string) bool {
	for _, c := range cells {
		if strings.Trim(c, "-: ") != "" || c == "" {
			return false
		}
	}
	return true
}

var (
	boldRe   = regexp.MustCompile(`\*\*([^*]+)\*\*`)
	codeRe   = regexp.MustCompile("`([^`]+)`")
	changeRe = regexp.MustCompile(`\(([+-])(\d+(?:\.\d+)?%)((?: per GPU)?)\)`)
)

// inline escapes text and renders the inline Markdown the report uses:
// `code`, **bold**, the <br> of table cells, and colours a "(+x%)" change.
func inline(s string) string {
	// Code spans first, so their content is left as written.
	var out strings.Builder
	for {
		loc := codeRe.FindStringSubmatchIndex(s)
		if loc == nil {
			out.WriteString(inlineText(s))
			break
		}
		out.WriteString(inlineText(s[:loc[0]]))
		out.WriteString("<code>" + html.EscapeString(s[loc[2]:loc[3]]) + "</code>")
		s = s[loc[1]:]
	}
	return out.String()
}

func inlineText(s string) string {
	s = html.EscapeString(s)
	s = strings.ReplaceAll(s, "&lt;br&gt;", "<br>")
	s = boldRe.ReplaceAllString(s, "<b>$1</b>")
	return changeRe.ReplaceAllStringFunc(s, func(m string) string {
		class := "up"
		if strings.HasPrefix(m, "(-") {
			class = "down"
		}
		return `<span class="` + class + `">` + m + `</span>`
	})
}

// anchor makes a heading's id: lower case, runs of other characters as "-".
func anchor(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}
