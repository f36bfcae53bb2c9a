" Batch test driver for the Vim plugin in editors/vim.
"   vim -N -u NONE -i NONE -n -es --cmd 'set rtp^=editors/vim' \
"       -S tests/editors/vim/run.vim -- MODE FILE...
" MODE syntax:   FILE has `// ^^^ Group` lines under the source line they
"                test (`// <--- Group` for the first columns). A Group
"                starting with `tlm` is compared with the syntax item, any
"                other with the highlight group it links to in the end
"                (synIDtrans); NONE means no highlighting.
" MODE indent:   FILE is correctly indented; strip all indentation, `gg=G`,
"                and compare; again after adding three spaces to each line.
" MODE keywords: FILE is `tlmc --print-keywords` output; every name must get
"                its class's syntax item in a snippet of code.
" Reports every failure, then exits non-zero (cquit); prints `vim MODE: ok`
" only when all passed.

filetype plugin indent on
syntax on

let s:failures = []
let s:nfail = 0
function! s:Fail(msg) abort
  let s:nfail += 1
  call extend(s:failures, split(a:msg, "\n"))
endfunction

function! s:Groups(lnum, col) abort
  let id = synID(a:lnum, a:col, 1)
  return [synIDattr(id, 'name'), synIDattr(synIDtrans(id), 'name')]
endfunction

function! s:Check(file, lnum, col, want) abort
  let [item, final] = s:Groups(a:lnum, a:col)
  if a:want ==# 'NONE'
    " Not highlighted: no item, or only a container (a body region) that
    " links to no highlight group.
    if empty(item) || final =~# '^tlm'
      return
    endif
  elseif (a:want =~# '^tlm' ? item : final) ==# a:want
    return
  endif
  call s:Fail(printf('%s:%d:%d: want %s, got %s (%s)', a:file, a:lnum, a:col,
        \ a:want, empty(item) ? 'NONE' : item, empty(final) ? 'NONE' : final))
endfunction

function! s:OpenTlm(file) abort
  execute 'silent edit!' fnameescape(a:file)
  if &filetype !=# 'tlm' || get(b:, 'current_syntax', '') !=# 'tlm'
    call s:Fail(a:file . ': not detected as tlm (filetype=' . &filetype . ')')
    return 0
  endif
  return 1
endfunction

function! s:Syntax(file) abort
  if !s:OpenTlm(a:file)
    return
  endif
  " The ftplugin's settings are part of what this test checks.
  if &commentstring !=# '// %s' || &matchpairs !=# '(:),{:},[:]'
    call s:Fail(a:file . ': ftplugin: commentstring=' . &commentstring
          \ . ' matchpairs=' . &matchpairs)
  endif
  let checked = 0
  let src = 0
  for lnum in range(1, line('$'))
    let text = getline(lnum)
    let m = matchlist(text, '^//\(\s*\)\(\^\+\|<-\+\)\s\+\(\S\+\)\s*$')
    if empty(m)
      if text !~# '^//'
        let src = lnum
      endif
      continue
    endif
    if m[2][0] ==# '<'
      let [first, width] = [1, len(m[2]) - 1]
    else
      let [first, width] = [3 + len(m[1]), len(m[2])]
    endif
    for col in range(first, first + width - 1)
      call s:Check(a:file, src, col, m[3])
      let checked += 1
    endfor
  endfor
  if checked == 0
    call s:Fail(a:file . ': no assertions')
  endif
endfunction

function! s:Indent(file) abort
  if !s:OpenTlm(a:file)
    return
  endif
  let want = getline(1, '$')
  " Reindent from no indentation at all, then from too much.
  for [pattern, with, how] in [['^\s\+', '', 'from none'], ['^\ze\s*\S', '   ', 'from too much']]
    silent execute '%substitute/' . pattern . '/' . with . '/e'
    " Parse the new text from scratch (no redraw updates the syntax state).
    let &l:syntax = 'tlm'
    silent normal! gg=G
    let got = getline(1, '$')
    for i in range(len(want))
      if got[i] !=# want[i]
        call s:Fail(printf("%s:%d: indent (%s)\n  want: %s\n  got:  %s", a:file, i + 1, how, want[i], got[i]))
      endif
    endfor
  endfor
  set nomodified
endfunction

" Each class is checked in a snippet where its names occur; the name starts
" at line 2, column 12 (`    d_ff = NAME`), except keywords and settings.
let s:snippets = {
      \ 'keyword':       [['NAME x'], 1, 1],
      \ 'setting':       [['model m {', '    NAME = 1;', '}'], 2, 5],
      \ 'train_setting': [['train {', '    NAME = 1;', '}'], 2, 5],
      \ 'study_setting': [['study s {', '    NAME = 1;', '}'], 2, 5],
      \ 'value':         [['model m {', '    d_ff = NAME;', '}'], 2, 12],
      \ 'call':          [['model m {', '    d_ff = NAME(1);', '}'], 2, 12],
      \ }
let s:items = {
      \ 'keyword': ['tlmKeyword', 'tlmInclude'],
      \ 'setting': ['tlmSetting'], 'train_setting': ['tlmTrainSetting'],
      \ 'study_setting': ['tlmStudySetting'],
      \ 'mixer': ['tlmMixer'], 'mlp': ['tlmMlp'], 'value': ['tlmValue'],
      \ 'function': ['tlmFunction'], 'builtin': ['tlmBuiltin'],
      \ 'constant': ['tlmConstant'], 'variable': ['tlmVariable'],
      \ 'schedule': ['tlmSchedule'],
      \ }
" Where expression lists overlap, the first class here wins (cosine is a
" schedule before it is a function, sigmoid before it is a builtin).
let s:precedence = ['schedule', 'builtin', 'function', 'constant', 'value', 'mixer', 'mlp', 'variable']

function! s:Keywords(file) abort
  let classes = {}
  for line in readfile(a:file)
    let m = matchlist(line, '^\(\h\w*\) \(\h\w*\)$')
    if empty(m)
      call s:Fail(a:file . ': bad line: ' . line)
      continue
    endif
    if !has_key(classes, m[1])
      let classes[m[1]] = []
    endif
    call add(classes[m[1]], m[2])
  endfor
  for class in keys(classes)
    if !has_key(s:items, class)
      call s:Fail('class ' . class . ' is new: teach editors/vim/syntax/tlm.vim and tests/editors/vim/run.vim about it')
    endif
  endfor
  for [class, names] in items(classes)
    if !has_key(s:items, class)
      continue
    endif
    for name in names
      let want = class
      if index(s:precedence, class) >= 0
        let want = filter(copy(s:precedence), {_, c -> index(get(classes, c, []), name) >= 0})[0]
      endif
      let kinds = class ==# 'keyword' ? ['keyword'] : class =~# 'setting$' ? [class]
            \ : class ==# 'schedule' ? ['value', 'call']
            \ : index(['function', 'builtin'], class) >= 0 ? ['call'] : ['value']
      for kind in kinds
        let [lines, lnum, col] = s:snippets[kind]
        " A fresh buffer each time, kept (not wiped) afterwards: without a
        " redraw, Vim may answer synID() from the cached syntax state of
        " earlier text, also of a wiped buffer whose memory a new one reuses.
        silent enew!
        call setline(1, map(copy(lines), {_, l -> substitute(l, 'NAME', name, '')}))
        setfiletype tlm
        let item = synIDattr(synID(lnum, col, 1), 'name')
        let itemend = synIDattr(synID(lnum, col + len(name) - 1, 1), 'name')
        if index(s:items[want], item) < 0 || itemend !=# item
          call s:Fail(printf('%s %s: editors/vim/syntax/tlm.vim gives %s in `%s`, want %s',
                \ class, name, empty(item) ? 'nothing' : item, getline(lnum), join(s:items[want], ' or ')))
        endif
        setlocal bufhidden=hide nomodified
      endfor
    endfor
  endfor
endfunction

let s:mode = argv(0)
let s:files = argv()[1:]
if empty(s:files) || index(['syntax', 'indent', 'keywords'], s:mode) < 0
  call s:Fail('usage: run.vim -- syntax|indent|keywords FILE...')
endif
for s:f in s:files
  if s:mode ==# 'keywords'
    call s:Keywords(s:f)
  else
    call s:{toupper(s:mode[0]) . s:mode[1:]}(s:f)
  endif
endfor

if empty(s:failures)
  call writefile(['vim ' . s:mode . ': ok (' . join(s:files) . ')'], '/dev/stdout', 'a')
  qall!
endif
call writefile(s:failures + [printf('vim %s: %d failure(s)', s:mode, s:nfail)], '/dev/stderr', 'a')
cquit!
