" Vim indent file
" Language: tlm
" A line is indented one shiftwidth deeper than the line that opened the
" innermost bracket still open at its start (so `f(g(` indents once); a line
" that starts with the closing bracket lines up with that opening line. A
" line that continues a statement (the code before it does not end in ; { }
" , or an opening bracket) gets one more shiftwidth, unless it starts a block.

if exists('b:did_indent')
  finish
endif
let b:did_indent = 1

setlocal indentexpr=GetTlmIndent(v:lnum)
setlocal indentkeys=0{,0},0),0],!^F,o,O,e,0=*/
setlocal nolisp nosmartindent nocindent autoindent
let b:undo_indent = 'setlocal indentexpr< indentkeys< lisp< smartindent< cindent< autoindent<'

if exists('*GetTlmIndent')
  finish
endif
let s:cpo_save = &cpo
set cpo&vim

" Brackets inside strings and comments do not count.
let s:skip = 'synIDattr(synID(line("."), col("."), 0), "name") =~# "tlm\\%(String\\|Comment\\|BlockComment\\|Escape\\|Todo\\)$"'

function! s:InBlockComment(lnum, col) abort
  return synIDattr(synID(a:lnum, a:col, 0), 'name') ==# 'tlmBlockComment'
endfunction

" The last character of code before line lnum ('' at the start of the file),
" passing over blank lines and comments.
function! s:LastCode(lnum) abort
  let lnum = prevnonblank(a:lnum - 1)
  while lnum > 0
    let text = getline(lnum)
    let col = len(text)
    while col > 0
      if text[col - 1] !~# '\s' && synIDattr(synID(lnum, col, 0), 'name') !~# 'Comment\|Todo'
        return text[col - 1]
      endif
      let col -= 1
    endwhile
    let lnum = prevnonblank(lnum - 1)
  endwhile
  return ''
endfunction

function! GetTlmIndent(lnum) abort
  let line = getline(a:lnum)
  let first = match(line, '\S') + 1
  let save = getcurpos()
  try
    " Inside a block comment, align with its text: ` * ...` under the `*`
    " of `/*`, anything else under the first character after `/* `.
    if first > 0 && s:InBlockComment(a:lnum, first)
          \ && line[first - 1 : first] !=# '/*'
      call cursor(a:lnum, first)
      let [clnum, ccol] = searchpos('/\*', 'bnW')
      if clnum > 0
        return virtcol([clnum, ccol]) - 1 + (line[first - 1] ==# '*' ? 1 : 3)
      endif
    endif

    " The innermost bracket still open at the start of the line.
    call cursor(a:lnum, 1)
    let [olnum, ocol] = searchpairpos('[[({]', '', '[])}]', 'bnW', s:skip)
    if line =~# '^\s*[])}]'
      return olnum > 0 ? indent(olnum) : 0
    endif
    let ind = olnum > 0 ? indent(olnum) + shiftwidth() : 0
    if line !~# '^\s*{' && s:LastCode(a:lnum) !~# '^[[;{}(,]\=$'
      let ind += shiftwidth()
    endif
    return ind
  finally
    call setpos('.', save)
  endtry
endfunction

let &cpo = s:cpo_save
unlet s:cpo_save
